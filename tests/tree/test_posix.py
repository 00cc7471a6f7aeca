"""POSIX answers of a rw mount of a group, each case run on the mount AND on a plain directory
(the reference): names and paths (NAME_MAX, a path deeper than PATH_MAX below the store's
root), inode numbers across renames, link counts, rename onto a directory, rmdir, unlink,
truncate, utimensat, and what the mount refuses by design. Where the answers differ, the
difference must be one docs/workspace.md documents (`DOCUMENTED`), and a case that answers as
the reference must not be in that list (issue 72)."""

from __future__ import annotations

import errno
import itertools
import os
import stat
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr

from tests.helpers.mounting import mounted

DOCS = Path(__file__).resolve().parents[2] / "docs" / "workspace.md"
LONG = "n" * 255  # NAME_MAX bytes
# The differences docs/workspace.md documents: case -> a line of its table of answers.
DOCUMENTED = {
    "chmod_file": "| `chmod` of a file | `EPERM` ",
    "links": "| `link`, `symlink` | `EPERM` |",
    "fifo": "| `mknod` of a FIFO, socket or device | `EPERM` |",
    "plain_file": "| `creat`/`open(O_CREAT)` of a file not named `NAME.npy` | `EPERM` |",
    "truncate_partial_row": "| `truncate` of `data` to a size that is not whole rows | `EINVAL` |",
    "rename_onto_array": "| `rename` of a group onto an array | `ENOTEMPTY` |",
}
_names = itertools.count()


@dataclass
class Place:
    kind: str  # "zarrfs" or "plain"
    root: Path

    def make_array(self, parent: Path, name: str) -> None:
        """An array (zarrfs: written as NAME.npy) or, in a plain directory, a directory with
        its `data` file: where the array's files are."""
        if self.kind == "zarrfs":
            np.save(parent / f"{name}.npy", np.arange(8, dtype="<i2"))
        else:
            (parent / name).mkdir()
            (parent / name / "data").write_bytes(np.arange(8, dtype="<i2").tobytes())


@pytest.fixture(scope="module")
def roots(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """A rw mount of a group made with zarr-python, and a plain directory, for the module;
    unmounted at its end whatever happened."""
    base = tmp_path_factory.mktemp("posix")
    zarr.open_group(base / "g.zarr", mode="w", zarr_format=3)
    (base / "plain").mkdir()
    with mounted(base / "g.zarr", base / "mnt", ["rw"]) as mount:
        yield {"zarrfs": mount.path, "plain": base / "plain"}


def answers(roots: dict[str, Path], case: Callable[[Place, Path], Any]) -> dict[str, Any]:
    """What `case` observes in a new group (a new directory) of each place."""
    found = {}
    for kind, root in roots.items():
        work = root / f"case{next(_names)}"
        work.mkdir()
        found[kind] = case(Place(kind, root), work)
    return found


def compare(name: str, found: dict[str, Any]) -> None:
    if found["zarrfs"] == found["plain"]:
        assert name not in DOCUMENTED, f"{name}: answers as a plain directory, yet listed as a difference"
    else:
        assert name in DOCUMENTED, f"{name}: undocumented difference: {found}"


def outcome(action: Callable[[], Any]) -> str:
    """"ok", or the errno's name."""
    try:
        action()
    except OSError as e:
        return errno.errorcode[e.errno]
    return "ok"


def drop_kernel_caches() -> None:
    """What the kernel caches of names and inodes, dropped: the next stat asks the mount."""
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text("2")


def run(roots: dict[str, Path], name: str, case: Callable[[Place, Path], Any]) -> dict[str, Any]:
    found = answers(roots, case)
    compare(name, found)
    return found


def test_the_documented_differences_are_in_the_docs_table() -> None:
    text = DOCS.read_text()
    assert [line for line in DOCUMENTED.values() if line not in text] == []


# -- names and paths -------------------------------------------------------------------------


def test_a_name_over_name_max_is_enametoolong(roots: dict[str, Path]) -> None:
    def case(place: Place, work: Path) -> tuple[str, ...]:
        name = "n" * 256
        creat = lambda: os.close(os.open(work / (name[:-4] + ".npy"), os.O_CREAT | os.O_WRONLY, 0o644))  # noqa: E731
        return (outcome(lambda: (work / name).mkdir()), outcome(lambda: os.stat(work / name)),
                outcome(creat), outcome(lambda: os.rename(work, work.parent / name)))

    assert run(roots, "name_256", case)["zarrfs"] == ("ENAMETOOLONG",) * 4


def test_a_name_of_name_max_works(roots: dict[str, Path]) -> None:
    def case(place: Place, work: Path) -> tuple[str, ...]:
        return outcome(lambda: (work / LONG).mkdir()), outcome(lambda: os.stat(work / LONG))

    assert run(roots, "name_255", case)["zarrfs"] == ("ok", "ok")


def test_sixteen_nested_names_of_name_max(roots: dict[str, Path]) -> None:
    """4,095 bytes below the mount (under PATH_MAX), over it below the store's root: made
    relative to each parent, as the store opens them."""
    def case(place: Place, work: Path) -> list[str]:
        made = []
        directory = os.open(work, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for _ in range(16):
                made.append(outcome(lambda d=directory: os.mkdir(LONG, dir_fd=d)))  # type: ignore[misc]
                inner = os.open(LONG, os.O_RDONLY | os.O_DIRECTORY, dir_fd=directory)
                os.close(directory)
                directory = inner
            made.append(outcome(lambda d=directory: os.listdir(d)))  # type: ignore[misc]
        finally:
            os.close(directory)
        return made

    assert run(roots, "deep_path", case)["zarrfs"] == ["ok"] * 17


# -- inode numbers and link counts -----------------------------------------------------------


def test_a_renamed_group_keeps_its_inode_number(roots: dict[str, Path]) -> None:
    def case(place: Place, work: Path) -> bool:
        (work / "a").mkdir()
        before = os.stat(work / "a").st_ino
        os.rename(work / "a", work / "b")
        drop_kernel_caches()
        return os.stat(work / "b").st_ino == before

    assert run(roots, "rename_keeps_ino", case)["zarrfs"] is True


def test_a_moved_group_keeps_the_numbers_of_everything_below(roots: dict[str, Path]) -> None:
    def case(place: Place, work: Path) -> bool:
        (work / "p").mkdir()
        (work / "p" / "sub").mkdir()
        place.make_array(work / "p", "arr")
        (work / "q").mkdir()
        names = ["sub", "arr", "arr/data"]
        before = [os.stat(work / "p" / n).st_ino for n in names]
        os.rename(work / "p", work / "q" / "p2")
        drop_kernel_caches()
        return [os.stat(work / "q" / "p2" / n).st_ino for n in names] == before

    assert run(roots, "move_keeps_ino_below", case)["zarrfs"] is True


def test_a_group_made_at_the_old_name_gets_another_number(roots: dict[str, Path]) -> None:
    def case(place: Place, work: Path) -> bool:
        (work / "a").mkdir()
        moved = os.stat(work / "a").st_ino
        os.rename(work / "a", work / "b")
        (work / "a").mkdir()
        drop_kernel_caches()
        return os.stat(work / "a").st_ino != moved and os.stat(work / "b").st_ino == moved

    assert run(roots, "new_at_old_name", case)["zarrfs"] is True


def test_a_listed_group_counts_its_subgroups_in_st_nlink(roots: dict[str, Path]) -> None:
    def case(place: Place, work: Path) -> int:
        (work / "x").mkdir()
        (work / "y").mkdir()
        os.listdir(work)
        drop_kernel_caches()  # (the kernel keeps a directory's attributes a minute)
        return os.stat(work).st_nlink

    assert run(roots, "nlink_group", case)["zarrfs"] == 4


# -- rename, rmdir, unlink -------------------------------------------------------------------


def test_rename_onto_an_empty_group_never_leaves_its_name_missing(roots: dict[str, Path]) -> None:
    """rename(2) replaces atomically: a reader of the store (zarr-python, another mount)
    watching the target's name finds it at every moment, locally (issue 72)."""
    stores = {"zarrfs": roots["zarrfs"].parent / "g.zarr", "plain": roots["plain"]}

    def case(place: Place, work: Path) -> int:
        missing = 0
        for attempt in range(20):
            (work / f"s{attempt}").mkdir()
            (work / f"t{attempt}").mkdir()
            target = stores[place.kind] / work.name / f"t{attempt}"
            assert target.is_dir()
            stop = threading.Event()
            with ThreadPoolExecutor(1) as pool:
                gaps = pool.submit(watch, target, stop)
                try:
                    os.rename(work / f"s{attempt}", work / f"t{attempt}")
                finally:
                    stop.set()
                missing += gaps.result()
        return missing

    assert run(roots, "rename_onto_empty_atomic", case)["zarrfs"] == 0


def watch(path: Path, stop: threading.Event) -> int:
    """How many times `path` was found missing until `stop`."""
    missing = 0
    while not stop.is_set():
        missing += not os.path.isdir(path)
    return missing


def test_rename_onto_an_empty_group_replaces_it(roots: dict[str, Path]) -> None:
    def case(place: Place, work: Path) -> tuple[str, bool, bool, bool]:
        (work / "s").mkdir()
        (work / "s" / "inner").mkdir()
        (work / "t").mkdir()
        number = os.stat(work / "s").st_ino
        done = outcome(lambda: os.rename(work / "s", work / "t"))
        drop_kernel_caches()
        return (done, (work / "s").exists(), (work / "t" / "inner").is_dir(),
                os.stat(work / "t").st_ino == number)

    assert run(roots, "rename_onto_empty", case)["zarrfs"] == ("ok", False, True, True)


def test_rename_onto_a_non_empty_group_is_enotempty(roots: dict[str, Path]) -> None:
    def case(place: Place, work: Path) -> tuple[str, bool]:
        (work / "s").mkdir()
        (work / "t").mkdir()
        (work / "t" / "k").mkdir()
        return outcome(lambda: os.rename(work / "s", work / "t")), (work / "s").is_dir()

    assert run(roots, "rename_onto_non_empty", case)["zarrfs"] == ("ENOTEMPTY", True)


def test_rename_of_a_group_onto_an_array(roots: dict[str, Path]) -> None:
    """A plain directory holding only `data` is no array: the mount's is never empty."""
    def case(place: Place, work: Path) -> str:
        (work / "s").mkdir()
        place.make_array(work, "arr")
        if place.kind == "plain":
            (work / "arr" / "data").unlink()  # (the reference: a directory that is empty)
        return outcome(lambda: os.rename(work / "s", work / "arr"))

    assert run(roots, "rename_onto_array", case)["zarrfs"] == "ENOTEMPTY"


def test_rename_of_a_group_onto_a_file_is_enotdir(roots: dict[str, Path]) -> None:
    def case(place: Place, work: Path) -> str:
        (work / "s").mkdir()
        place.make_array(work, "arr")
        return outcome(lambda: os.rename(work / "s", work / "arr" / "data"))

    found = run(roots, "rename_onto_file", case)["zarrfs"]
    assert found == "ENOTDIR"


def test_rmdir_of_a_non_empty_group_and_unlink_of_a_group(roots: dict[str, Path]) -> None:
    def case(place: Place, work: Path) -> tuple[str, str]:
        (work / "g").mkdir()
        (work / "g" / "k").mkdir()
        return outcome(lambda: os.rmdir(work / "g")), outcome(lambda: os.unlink(work / "g"))

    assert run(roots, "rmdir_unlink", case)["zarrfs"] == ("ENOTEMPTY", "EISDIR")


# -- truncate and times ----------------------------------------------------------------------


def test_truncate_of_data_by_whole_rows(roots: dict[str, Path]) -> None:
    def case(place: Place, work: Path) -> tuple[str, int]:
        place.make_array(work, "arr")
        data = work / "arr" / "data"
        return outcome(lambda: os.truncate(data, 8)), data.stat().st_size

    assert run(roots, "truncate_rows", case)["zarrfs"] == ("ok", 8)


def test_truncate_of_data_to_part_of_a_row(roots: dict[str, Path]) -> None:
    def case(place: Place, work: Path) -> str:
        place.make_array(work, "arr")
        return outcome(lambda: os.truncate(work / "arr" / "data", 3))

    assert run(roots, "truncate_partial_row", case)["zarrfs"] == "EINVAL"


def test_utimensat_times_show_in_stat(roots: dict[str, Path]) -> None:
    def case(place: Place, work: Path) -> tuple[int, ...]:
        place.make_array(work, "arr")
        given = (1_000_000_000_000_000_000, 1_200_000_000_000_000_000)
        os.utime(work / "arr", ns=given)
        os.utime(work / "arr" / "data", ns=given)
        drop_kernel_caches()
        group, data = os.stat(work / "arr"), os.stat(work / "arr" / "data")
        return group.st_atime_ns, group.st_mtime_ns, data.st_atime_ns, data.st_mtime_ns

    assert run(roots, "utimensat", case)["zarrfs"] == (10**18, 12 * 10**17) * 2


# -- refused or ignored by design ------------------------------------------------------------


def test_chmod_of_a_directory(roots: dict[str, Path]) -> None:
    def case(place: Place, work: Path) -> tuple[int, int]:
        place.make_array(work, "arr")
        os.chmod(work, 0o701)
        os.chmod(work / "arr", 0o750)
        drop_kernel_caches()
        return stat.S_IMODE(os.stat(work).st_mode), stat.S_IMODE(os.stat(work / "arr").st_mode)

    assert run(roots, "chmod_directory", case)["zarrfs"] == (0o701, 0o750)


def test_chmod_of_a_file(roots: dict[str, Path]) -> None:
    def case(place: Place, work: Path) -> str:
        place.make_array(work, "arr")
        return outcome(lambda: os.chmod(work / "arr" / "data", 0o600))

    assert run(roots, "chmod_file", case)["zarrfs"] == "EPERM"


def test_mkdir_mode(roots: dict[str, Path]) -> None:
    def case(place: Place, work: Path) -> tuple[int, int]:
        os.mkdir(work / "m", 0o751)
        os.mkdir(work / "m" / "n", 0o777)
        drop_kernel_caches()
        return stat.S_IMODE(os.stat(work / "m").st_mode), stat.S_IMODE(os.stat(work / "m" / "n").st_mode)

    umask = os.umask(0)
    os.umask(umask)
    assert run(roots, "mkdir_mode", case)["zarrfs"] == (0o751 & ~umask, 0o777 & ~umask)


def test_links(roots: dict[str, Path]) -> None:
    def case(place: Place, work: Path) -> tuple[str, str]:
        (work / "g").mkdir()
        return outcome(lambda: os.symlink("g", work / "s")), outcome(lambda: os.link(work / "g", work / "h"))

    assert run(roots, "links", case)["zarrfs"] == ("EPERM", "EPERM")


def test_fifo(roots: dict[str, Path]) -> None:
    assert run(roots, "fifo", lambda place, work: outcome(lambda: os.mkfifo(work / "f")))["zarrfs"] == "EPERM"


def test_plain_file(roots: dict[str, Path]) -> None:
    def case(place: Place, work: Path) -> str:
        return outcome(lambda: os.close(os.open(work / "x.txt", os.O_CREAT | os.O_WRONLY, 0o644)))

    assert run(roots, "plain_file", case)["zarrfs"] == "EPERM"


def test_inode_identities_follow_moves_and_never_come_back() -> None:
    """The table alone (no mount): numbers follow nested moves, a delete makes new ones."""
    from zarrfs.tree import GROUP, Ref
    from zarrfs.tree.inodes import InodeTable

    table = InodeTable(Ref("", GROUP))
    first = {p: table.remember(Ref(p, GROUP)) for p in ("a", "a/b", "a/b/c")}
    table.moved("a/b", "x")
    table.moved("a", "y")
    assert table.number(Ref("x", GROUP)) == first["a/b"]
    assert table.number(Ref("x/c", GROUP)) == first["a/b/c"]
    assert table.number(Ref("y", GROUP)) == first["a"]
    assert table.ref(first["a/b/c"]) == Ref("x/c", GROUP)
    assert {table.number(Ref(p, GROUP)) for p in first} & set(first.values()) == set()
    table.deleted("x")
    assert table.ref(first["a/b"]) is None
    assert table.number(Ref("x", GROUP)) != first["a/b"]
    table.moved("y", "x")  # (onto the deleted name: the moved node's number comes along)
    assert table.number(Ref("x", GROUP)) == first["a"]
