"""`.versions/` of an Icechunk mount: every branch, tag and snapshot as a read-only directory,
and the mounted branch's log, against what icechunk's own API reads at each version."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from datetime import UTC
from pathlib import Path
from typing import TypeVar

import icechunk
import numpy as np
import pytest
import zarr

from tests.helpers.icechunk_repos import PLAIN, SHARDED, Repository, create
from zarrfs.declared import OptionValues
from zarrfs.errors import EditRefused, ReadOnlyError
from zarrfs.store.icechunk import REF
from zarrfs.store.icechunk import branches as icechunk_branches
from zarrfs.store.icechunk import versions as icechunk_versions
from zarrfs.store.settings import SourceOptions
from zarrfs.tree import versions as tree_versions

T = TypeVar("T")
DTYPES = {PLAIN: "<i4", SHARDED: "<f8"}
SHAPES = {PLAIN: (30, 20), SHARDED: (40, 12)}
PLAIN_CHUNK = (8, 8)
# What a branch directory, its log and a kind's listing may lag behind the repository.
CATCH_UP_SECONDS = icechunk_branches.HEAD_LOOKUP_SECONDS + tree_versions.NAMES_SECONDS + 5


@pytest.fixture
def repository(tmp_path: Path) -> Repository:
    """main: `first` (tagged v1), `second`, `third`; dev: from `second`, with `dev work`."""
    repository = create(tmp_path / "repo")
    second = repository.commit("second", plain=((slice(0, 8), slice(0, 8)), 7))
    repository.repo.create_branch("dev", second)
    commit_on(repository, "dev", "dev work", SHARDED, (slice(0, 5), slice(0, 4)), -2.5)
    repository.commit("third", plain=((slice(10, 12), slice(None)), 99))
    return repository


def commit_on(repository: Repository, branch: str, message: str, array: str,
              selection: tuple[slice, ...], value: object) -> str:
    session = repository.repo.writable_session(branch)
    zarr.open_array(session.store, path=array, mode="r+")[selection] = value
    return str(session.commit(message))


def read_version(repository: Repository, kind: str, name: str, array: str) -> np.ndarray:
    """What zarr-python reads of `array` through icechunk at a branch, tag or snapshot."""
    repo = repository.repo
    session = (repo.readonly_session(branch=name) if kind == "branches"
               else repo.readonly_session(tag=name) if kind == "tags"
               else repo.readonly_session(snapshot_id=name))
    return np.asarray(zarr.open_array(session.store, path=array, mode="r")[...])


def shown(directory: Path, array: str) -> np.ndarray:
    return np.frombuffer((directory / array / "data").read_bytes(), DTYPES[array]).reshape(SHAPES[array])


def reachable(repository: Repository) -> set[str]:
    repo = repository.repo
    walks = [*(repo.ancestry(branch=b) for b in repo.list_branches()),
             *(repo.ancestry(tag=t) for t in repo.list_tags())]
    return {info.id for walk in walks for info in walk}


def log_lines(repository: Repository, branch: str) -> list[str]:
    return [f"{info.id} {info.written_at.astimezone(UTC).isoformat().replace('+00:00', 'Z')} {info.message}"
            for info in repository.repo.ancestry(branch=branch)]


def wait_until(look: Callable[[], T], done: Callable[[T], bool], within: float = CATCH_UP_SECONDS) -> T:
    """Look again until `done` says so or `within` seconds pass; the last look."""
    deadline = time.monotonic() + within
    while True:
        found = look()
        if done(found) or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


@pytest.mark.fast
def test_every_version_shows_the_arrays_as_icechunk_reads_them(repository: Repository, mount_array) -> None:
    mount = mount_array(repository.url)
    versions = mount.path / ".versions"
    assert sorted(os.listdir(mount.path)) == [".versions", "data.h5", "data.nc", "plain", "sub", "zarr.json"]
    assert os.stat(mount.path).st_nlink == 2 + 3  # (plain/, sub/ and .versions/, once listed)
    assert sorted(os.listdir(versions)) == ["branches", "log", "snapshots", "tags"]
    assert sorted(os.listdir(versions / "branches")) == ["dev", "main"]
    assert sorted(os.listdir(versions / "tags")) == ["v1"]
    snapshots = set(os.listdir(versions / "snapshots"))
    assert snapshots == reachable(repository) and len(snapshots) == 5  # (with the empty first one)
    named = [("branches", "main"), ("branches", "dev"), ("tags", "v1")]
    empty = list(repository.repo.ancestry(branch="main"))[-1].id
    with_data = [("snapshots", s) for s in snapshots if s != empty]
    seen = set()
    for kind, name in named + with_data:
        directory = versions / kind / name
        for array in (PLAIN, SHARDED):
            expected = read_version(repository, kind, name, array)
            np.testing.assert_array_equal(shown(directory, array), expected, err_msg=f"{kind}/{name}/{array}")
            np.testing.assert_array_equal(np.load(directory / array / "data.npy"), expected)
        chunk = np.frombuffer((directory / PLAIN / "chunks/c/0/1").read_bytes(), DTYPES[PLAIN])
        np.testing.assert_array_equal(chunk.reshape(PLAIN_CHUNK),
                                      read_version(repository, kind, name, PLAIN)[:8, 8:16])
        seen.add(shown(directory, PLAIN).tobytes() + shown(directory, SHARDED).tobytes())
    assert len(seen) == 4  # (v1, second, third and dev work differ)


def test_a_snapshot_not_listed_looks_up_and_a_bad_id_does_not(repository: Repository, mount_array) -> None:
    lost = commit_on(repository, "dev", "lost work", PLAIN, (slice(0, 1), slice(0, 1)), 12345)
    repository.repo.delete_branch("dev")
    mount = mount_array(repository.url)
    snapshots = mount.path / ".versions/snapshots"
    assert lost not in os.listdir(snapshots)
    np.testing.assert_array_equal(shown(snapshots / lost, PLAIN),
                                  read_version(repository, "snapshots", lost, PLAIN))
    assert shown(snapshots / lost, PLAIN)[0, 0] == 12345
    for bad in ("AAAAAAAAAAAAAAAAAAA0", "nonsense"):
        assert not (snapshots / bad).exists()
    assert not (mount.path / ".versions/branches/dev").exists()
    assert not (mount.path / ".versions/tags/main").exists()  # (a branch is no tag)


def test_the_log_is_the_mounted_branchs_ancestry(repository: Repository, mount_array) -> None:
    for branch in ("main", "dev"):
        mount = mount_array(repository.url, [f"ref={branch}"])
        assert (mount.path / ".versions/log").read_text().splitlines() == log_lines(repository, branch)
    assert len(log_lines(repository, "main")) == 4


def test_another_writers_commit_branch_and_tag_appear(repository: Repository, mount_array) -> None:
    mount = mount_array(repository.url)
    versions = mount.path / ".versions"
    before = shown(versions / "branches/main", PLAIN)
    old_log = (versions / "log").read_text()
    assert sorted(os.listdir(versions / "branches")) == ["dev", "main"]

    head = repository.commit("another writer", plain=((slice(20, 22), slice(None)), -7))
    repository.repo.create_branch("late", head)
    repository.repo.create_tag("v2", head)
    expected = repository.read(PLAIN)
    assert not np.array_equal(before, expected)

    np.testing.assert_array_equal(
        wait_until(lambda: shown(versions / "branches/main", PLAIN), lambda a: np.array_equal(a, expected)),
        expected)
    log = wait_until(lambda: (versions / "log").read_text(), lambda text: text != old_log)
    assert log.splitlines() == log_lines(repository, "main") and log.startswith(head)
    assert wait_until(lambda: sorted(os.listdir(versions / "branches")),
                      lambda names: "late" in names) == ["dev", "late", "main"]
    assert wait_until(lambda: sorted(os.listdir(versions / "tags")),
                      lambda names: "v2" in names) == ["v1", "v2"]
    assert head in os.listdir(versions / "snapshots")
    np.testing.assert_array_equal(shown(versions / "tags/v2", PLAIN), expected)
    np.testing.assert_array_equal(shown(versions / "branches/late", PLAIN), expected)
    np.testing.assert_array_equal(shown(versions / "tags/v1", PLAIN),
                                  read_version(repository, "tags", "v1", PLAIN))


def test_diff_between_a_tag_and_a_branch_names_the_changed_files(
        repository: Repository, mount_array, tmp_path: Path) -> None:
    mount = mount_array(repository.url)
    old, new = mount.path / ".versions/tags/v1", mount.path / ".versions/branches/main"
    result = subprocess.run(["diff", "-rq", str(old), str(new)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stderr
    differing = {line.split(" and ")[0].removeprefix(f"Files {old}/") for line in result.stdout.splitlines()}
    diff = repository.repo.diff(from_tag="v1", to_branch="main")
    chunks = {f"{PLAIN}/chunks/c/{i}/{j}" for i, j in diff.updated_chunks["/" + PLAIN]}
    assert chunks == {"plain/chunks/c/0/0", "plain/chunks/c/1/0", "plain/chunks/c/1/1", "plain/chunks/c/1/2"}
    # (the headers alone are the same)
    views = {f"{PLAIN}/{name}" for name in ("data", "data.npy", "data.nii", "data.fits", "data.tif",
                                            "data.h5")}
    assert differing == chunks | views | {"data.nc", "data.h5"}
    copy = tmp_path / "copy"
    shutil.copytree(old, copy)  # (cp -r)
    assert (copy / PLAIN / "data").read_bytes() == (old / PLAIN / "data").read_bytes()
    np.testing.assert_array_equal(np.load(copy / PLAIN / "data.npy"),
                                  read_version(repository, "tags", "v1", PLAIN))


@pytest.mark.parametrize("options", [[], ["rw"]])
def test_nothing_below_versions_can_be_written(repository: Repository, mount_array,
                                               options: list[str]) -> None:
    mount = mount_array(repository.url, options)
    versions = mount.path / ".versions"
    version = versions / "branches/main"
    attempts: list[Callable[[], object]] = [
        lambda: open(version / PLAIN / "data", "r+b").close(),
        lambda: (version / PLAIN / "chunks/c/0/0").write_bytes(b"\0"),
        lambda: (version / "new.npy").write_bytes(b""),
        lambda: (version / "group").mkdir(),
        lambda: (versions / "snapshots/new").mkdir(),
        lambda: (versions / "other").mkdir(),
        lambda: shutil.rmtree(version / PLAIN),
        lambda: os.rename(version / PLAIN, version / "moved"),
        lambda: os.rename(mount.path / PLAIN, version / "moved"),
        lambda: os.truncate(version / PLAIN / "data", 0),
        lambda: os.setxattr(version / PLAIN, "user.zarr.attributes", b"{}"),
        lambda: (versions / "log").write_text(""),
        lambda: os.rmdir(versions / "tags/v1"),
    ]
    if not options:
        attempts.append(lambda: (versions / "tags/new").mkdir())
    for attempt in attempts:
        with pytest.raises(OSError) as raised:
            attempt()
        assert raised.value.errno == errno.EROFS, raised.value
    assert repository.repo.list_tags() == {"v1"}
    np.testing.assert_array_equal(shown(version, PLAIN), repository.read(PLAIN))


def test_mkdir_makes_a_tag_and_a_branch_on_a_writable_mount(repository: Repository, mount_array) -> None:
    mount = mount_array(repository.url, ["rw"])
    if not os.access(mount.path, os.W_OK):  # (EROFS: the daemon took the mount read-only)
        pytest.skip("Icechunk mounts are read-only in this tree: -o rw falls back to read-only")
    versions = mount.path / ".versions"
    head = repository.repo.lookup_branch("main")
    (versions / "tags/t2").mkdir()
    (versions / "branches/b2").mkdir()
    assert repository.repo.lookup_tag("t2") == head
    assert repository.repo.lookup_branch("b2") == head
    np.testing.assert_array_equal(shown(versions / "tags/t2", PLAIN), repository.read(PLAIN))
    for existing in ("tags/v1", "tags/t2", "branches/dev"):
        with pytest.raises(OSError) as raised:
            (versions / existing).mkdir()
        assert raised.value.errno == errno.EEXIST
    with pytest.raises(OSError) as raised:
        (versions / "tags/.hidden").mkdir()
    assert raised.value.errno == errno.EINVAL
    assert "refused" in mount.log()


def test_listing_versions_opens_none(repository: Repository, mount_array, tmp_path: Path) -> None:
    for number in range(20):
        repository.repo.create_branch(f"b{number:02}", repository.repo.lookup_branch("main"))
    requests = tmp_path / "requests.log"
    mount = mount_array(repository.url, env={"ZARRFS_REQUEST_LOG": str(requests)})
    requests.write_text("")
    assert len(subprocess.run(["ls", "-l", str(mount.path / ".versions/branches")], capture_output=True,
                              check=True, text=True, timeout=60).stdout.splitlines()) == 23  # (and "total")
    below = [line.split("\t") for line in requests.read_text().splitlines() if "/.versions/" in line]
    assert [(kind, key) for kind, _, _, key in below] == [("list", "/.versions/branches")]


def test_a_mount_of_another_store_has_no_versions(tmp_path: Path, mount_array) -> None:
    zarr.open_group(str(tmp_path / "group.zarr"), mode="w").create_array("a", shape=(4,), dtype="u1")
    mount = mount_array(tmp_path / "group.zarr")
    assert ".versions" not in os.listdir(mount.path)
    assert not (mount.path / ".versions").exists()
    assert os.stat(mount.path).st_nlink == 2 + 1  # (a/, once listed: no .versions/ counted)


def test_a_repository_whose_root_is_an_array_has_no_versions(tmp_path: Path, mount_array) -> None:
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(str(tmp_path / "repo")))
    session = repo.writable_session("main")
    zarr.create_array(session.store, shape=(4,), dtype="u1", fill_value=3)
    session.commit("an array")
    mount = mount_array(f"icechunk://{tmp_path / 'repo'}")
    assert ".versions" not in os.listdir(mount.path)
    assert (mount.path / "data").read_bytes() == b"\3" * 4


def test_a_new_tag_or_branch_is_made_at_the_mounted_branchs_head(repository: Repository) -> None:
    """What `mkdir` in `.versions/tags` or `.versions/branches` asks of the store (rw mounts)."""
    fs, _ = icechunk_versions.open_filesystem(repository.url, {}, SourceOptions(OptionValues({REF: "dev"})))
    head = repository.repo.lookup_branch("dev")
    fs.create_version("tags", "t2")
    fs.create_version("branches", "b2")
    assert repository.repo.lookup_tag("t2") == head and repository.repo.lookup_branch("b2") == head
    assert fs.version_names("tags") == ["t2", "v1"]
    for kind, name, code in [("tags", "v1", errno.EEXIST), ("branches", "main", errno.EEXIST),
                             ("tags", ".hidden", errno.EINVAL), ("branches", "a/b", errno.EINVAL)]:
        with pytest.raises(EditRefused) as raised:
            fs.create_version(kind, name)
        assert raised.value.errno == code, (kind, name)
    with pytest.raises(ReadOnlyError):
        fs.create_version("snapshots", "x")
    assert repository.repo.list_tags() == {"t2", "v1"}
