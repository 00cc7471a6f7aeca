"""Real clients writing through `zarrfs serve -o rw`, read back with zarr-python from the store:
rclone copying a `.npy` into a group (a new array) and raw bytes onto `data`, and syncing a
directory into an array's with a filter naming `data` alone; davfs2 mounting the server as
root, writing into `data` in place, copying a new `.npy` in, and reading the views.

rclone (vendor `other`) can neither read a hash here nor set a modification time, so it
compares files by size alone: a change of the same size is sent with `--ignore-times`. What
each client sends is what the tests assert, from rclone's own dump and the store after."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
import zarr

from tests.helpers.serving import served
from tests.helpers.webdav_clients import DAVFS, Exchange, davfs2_mounted, rclone, rclone_env, rclone_sent

SHAPE = (64, 40)
VALUES = np.arange(np.prod(SHAPE), dtype="<i4").reshape(SHAPE)
ROW = SHAPE[1] * 4  # bytes of a row of `a`'s data
NOT_SUPPORTED = 100 * 365 * 24 * 3600 * 10**9  # rclone's ModTimeNotSupported (ns): no modtimes


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    group = zarr.open_group(tmp_path / "g.zarr", mode="w", zarr_format=3)
    group.create_array("a", shape=SHAPE, chunks=(16, 16), dtype="<i4")[...] = VALUES
    group.create_group("group")
    return tmp_path / "g.zarr"


def stored(tree: Path, name: str = "a") -> np.ndarray:
    return np.asarray(zarr.open_array(tree / name, mode="r")[...])


def refused(sent: list[Exchange]) -> set[Exchange]:
    return {e for e in sent if e.status >= 400 or e.status == 0}


# MKCOL of the parent before a file is sent: rclone takes 405 (the name is in use) as there.
PARENT_EXISTS = {"/a/": Exchange("MKCOL", "/a/", 405), "/group/": Exchange("MKCOL", "/group/", 405)}


# -- rclone ---------------------------------------------------------------------------------------

@pytest.mark.fast
def test_rclone_copyto_of_a_npy_makes_an_array(tree: Path, tmp_path: Path) -> None:
    made = np.linspace(-1, 1, 600, dtype="<f4").reshape(20, 30)
    np.save(tmp_path / "new.npy", made)
    with served(tree, tmp_path, ["rw"]) as server:
        done, sent = rclone_sent(server.url, "copyto", str(tmp_path / "new.npy"), "z:group/new.npy")
        assert done.returncode == 0, done.stderr
        assert Exchange("PUT", "/group/new.npy", 201) in sent
        assert refused(sent) <= {PARENT_EXISTS["/group/"], Exchange("PROPFIND", "/group/new.npy", 404)}, sent
        cat = subprocess.run(["rclone", "cat", "z:group/new/data"], capture_output=True, timeout=120,
                             env=rclone_env(server.url))
        assert cat.stdout == made.tobytes(), cat.stderr
        assert server.stop() == 0
    assert np.array_equal(stored(tree, "group/new"), made)


@pytest.mark.fast
def test_rclone_copyto_replaces_the_values_of_data(tree: Path, tmp_path: Path) -> None:
    new = -3 * VALUES
    new.tofile(tmp_path / "raw")
    with served(tree, tmp_path, ["rw"]) as server:
        features = json.loads(rclone(server.url, "backend", "features", "z:").stdout)
        assert features["Hashes"] == [] and features["Precision"] >= NOT_SUPPORTED  # (so: sizes)
        skipped, sent = rclone_sent(server.url, "copyto", str(tmp_path / "raw"), "z:a/data")
        assert skipped.returncode == 0 and "Sizes identical" in skipped.stderr
        assert {e.method for e in sent} == {"PROPFIND"}  # (nothing sent: the sizes are equal)
        done, sent = rclone_sent(server.url, "copyto", "--ignore-times", str(tmp_path / "raw"), "z:a/data")
        assert done.returncode == 0, done.stderr
        assert Exchange("PUT", "/a/data", 204) in sent
        assert refused(sent) <= {PARENT_EXISTS["/a/"]}, sent
        assert np.array_equal(stored(tree), new)  # (stored once answered)
        assert "Traceback" not in server.log()


@pytest.mark.fast
def test_rclone_sync_of_data_alone_sends_only_what_changed(tree: Path, tmp_path: Path) -> None:
    local = tmp_path / "local"
    local.mkdir()
    grown = np.arange(80 * SHAPE[1], dtype="<i4").reshape(80, SHAPE[1]) + 5  # (16 more rows)
    grown.tofile(local / "data")
    (local / "zarr.json").write_text("{}")  # (beside it, filtered out: neither sent nor deleted)
    (local / "notes.txt").write_text("not sent\n")
    # (`/data`, anchored: rclone lists no directory below the array's; unanchored, `data` may be
    # any file of any depth, so it lists every directory of chunks/)
    sync = ["sync", str(local), "z:a", "--include", "/data"]
    with served(tree, tmp_path, ["rw"]) as server:
        done, sent = rclone_sent(server.url, *sync)
        assert done.returncode == 0, done.stderr
        assert [e for e in sent if e.method != "PROPFIND"] in (
            [Exchange("PUT", "/a/data", 204)], [PARENT_EXISTS["/a/"], Exchange("PUT", "/a/data", 204)])
        assert not any("/chunks" in e.path for e in sent), sent
        assert np.array_equal(stored(tree), grown)  # (a new length: new rows, as truncate(2))

        again, sent = rclone_sent(server.url, *sync)
        assert again.returncode == 0 and "There was nothing to transfer" in again.stderr
        assert {e.method for e in sent} == {"PROPFIND"}
        unanchored, sent = rclone_sent(server.url, *sync[:-1], "data")  # (any file named data)
        assert unanchored.returncode == 0 and {e.method for e in sent} == {"PROPFIND"}, sent
        assert any(e.path.startswith("/a/chunks/") for e in sent)

        changed = grown.copy()
        changed[7] = -1
        changed.tofile(local / "data")  # (the same size: only --ignore-times sends it)
        done, sent = rclone_sent(server.url, *sync, "--ignore-times")
        assert done.returncode == 0 and Exchange("PUT", "/a/data", 204) in sent, done.stderr
        assert refused(sent) <= {PARENT_EXISTS["/a/"]}, sent
        assert server.stop() == 0
    assert np.array_equal(stored(tree), changed)
    assert json.loads((tree / "a" / "zarr.json").read_text())["shape"] == [80, SHAPE[1]]
    assert not (tree / "a" / "notes.txt").exists()


# -- davfs2 ---------------------------------------------------------------------------------------

as_root_with_davfs2 = pytest.mark.skipif(DAVFS is None or os.geteuid() != 0,
                                         reason="davfs2 mounts as root (scripts/install installs it)")


def dd_row(row: int, value: int, data: Path, tmp_path: Path) -> None:
    """One row of `data` written in place (open, write, close: davfs2 sends the file then)."""
    source = tmp_path / f"row{row}"
    np.full(SHAPE[1], value, dtype="<i4").tofile(source)
    subprocess.run(["dd", f"if={source}", f"of={data}", f"bs={ROW}", f"seek={row}", "conv=notrunc",
                    "status=none"], check=True, timeout=120)


@as_root_with_davfs2
def test_davfs2_writes_into_data_and_reads_the_views(tree: Path, tmp_path: Path) -> None:
    with served(tree, tmp_path, ["rw"]) as server, davfs2_mounted(server.url, tmp_path / "dav") as mount:
        array = mount.path / "a"
        assert np.array_equal(np.load(array / "data.npy"), VALUES)
        assert np.array_equal(np.fromfile(array / "data", "<i4").reshape(SHAPE), VALUES)
        dd_row(5, -7, array / "data", tmp_path)
        mount.unmount()  # (it waits until mount.davfs has sent the file)
        expected = VALUES.copy()
        expected[5] = -7
        assert np.array_equal(stored(tree), expected)
        assert "Traceback" not in server.log()


@as_root_with_davfs2
def test_davfs2_writes_one_file_twice_in_one_mount(tree: Path, tmp_path: Path) -> None:
    """davfs2 sends each write with `If-Match:` the ETag it holds of the file: the one the
    last PUT answered (a stale one loses the second write to davfs2's lost+found)."""
    with served(tree, tmp_path, ["rw"]) as server, davfs2_mounted(server.url, tmp_path / "dav") as mount:
        dd_row(2, -2, mount.path / "a" / "data", tmp_path)
        dd_row(4, -4, mount.path / "a" / "data", tmp_path)
        mount.unmount()
        assert (stored(tree)[2] == -2).all() and (stored(tree)[4] == -4).all(), server.log()


@as_root_with_davfs2
def test_davfs2_copies_a_npy_into_a_group(tree: Path, tmp_path: Path) -> None:
    """davfs2 LOCKs a new name (an empty file), asks its ETag (HEAD), and PUTs the bytes with
    `If-Match:` that ETag."""
    made = np.arange(30, dtype="<f8").reshape(5, 6) / 7
    np.save(tmp_path / "made.npy", made)
    with served(tree, tmp_path, ["rw"]) as server, davfs2_mounted(server.url, tmp_path / "dav") as mount:
        subprocess.run(["cp", str(tmp_path / "made.npy"), str(mount.path / "group" / "made.npy")],
                       check=True, timeout=120)
        mount.unmount()
        assert np.array_equal(stored(tree, "group/made"), made), server.log()
