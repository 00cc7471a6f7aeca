"""Icechunk repositories (`icechunk://`), mounted read-only (no `-o rw`) at a branch, tag or
snapshot, against what zarr-python reads through icechunk (writes: test_icechunk_writes.py)."""

from __future__ import annotations

import errno
import os
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.icechunk_repos import PLAIN, SHARDED, Repository, create, create_on_s3
from tests.helpers.mounting import ZARRFS
from tests.helpers.s3_server import S3_ENV, S3Server, free_port, running
from zarrfs.declared import OptionValues
from zarrfs.store.icechunk import REF
from zarrfs.store.icechunk import branches as icechunk_branches
from zarrfs.store.icechunk import filesystem as icechunk_store
from zarrfs.store.settings import SourceOptions

PLAIN_DTYPE, PLAIN_SHAPE = "<i4", (30, 20)
SHARDED_DTYPE, SHARDED_SHAPE = "<f8", (40, 12)


@pytest.fixture
def repository(tmp_path: Path) -> Repository:
    return create(tmp_path / "repo")


def mounted_array(mount_path: Path, array: str, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    # (read_bytes lets go of the GIL while it waits, np.fromfile does not: the moto server
    # answering the mount runs in this process)
    return np.frombuffer((mount_path / array / "data").read_bytes(), dtype).reshape(shape)


@pytest.mark.fast
def test_a_group_mounts_with_its_plain_and_sharded_arrays(repository: Repository, mount_array) -> None:
    mount = mount_array(repository.url)
    assert sorted(os.listdir(mount.path)) == [".versions", "data.h5", "data.nc", "plain", "sub", "zarr.json"]
    np.testing.assert_array_equal(mounted_array(mount.path, PLAIN, PLAIN_DTYPE, PLAIN_SHAPE),
                                  repository.read(PLAIN))
    np.testing.assert_array_equal(mounted_array(mount.path, SHARDED, SHARDED_DTYPE, SHARDED_SHAPE),
                                  repository.read(SHARDED))
    # A chunk file (an edge chunk: full size, the part past the edge the fill value).
    edge = np.frombuffer((mount.path / PLAIN / "chunks/c/3/2").read_bytes(), PLAIN_DTYPE).reshape(8, 8)
    np.testing.assert_array_equal(edge[:6, :4], repository.read(PLAIN)[24:, 16:])
    assert (edge[6:] == -1).all() and (edge[:, 4:] == -1).all()
    assert os.getxattr(mount.path / SHARDED, "user.zarr.shape") == b"40,12"


def test_a_tag_and_a_snapshot_id_show_what_they_name(repository: Repository, mount_array) -> None:
    first = str(repository.repo.lookup_tag("v1"))
    old = repository.read(PLAIN)
    repository.commit("second", plain=((slice(0, 8), slice(0, 8)), 7))
    new = repository.read(PLAIN)
    assert not np.array_equal(old, new)
    for ref in ("v1", first):
        mount = mount_array(repository.url, [f"ref={ref}"])
        np.testing.assert_array_equal(mounted_array(mount.path, PLAIN, PLAIN_DTYPE, PLAIN_SHAPE), old)
    np.testing.assert_array_equal(
        mounted_array(mount_array(repository.url).path, PLAIN, PLAIN_DTYPE, PLAIN_SHAPE), new)


def test_a_branch_shows_another_writers_commit_once_the_file_is_reopened(
        repository: Repository, mount_array) -> None:
    branch = mount_array(repository.url)  # main, recheck=open
    tag = mount_array(repository.url, ["ref=v1"])
    old_plain, old_sharded = repository.read(PLAIN), repository.read(SHARDED)
    for mount in (branch, tag):
        np.testing.assert_array_equal(mounted_array(mount.path, PLAIN, PLAIN_DTYPE, PLAIN_SHAPE), old_plain)
        np.testing.assert_array_equal(
            mounted_array(mount.path, SHARDED, SHARDED_DTYPE, SHARDED_SHAPE), old_sharded)

    repository.commit("another writer", plain=((slice(10, 12), slice(None)), 99),
                      sub__sharded=((slice(0, 5), slice(0, 4)), -2.5))
    new_plain, new_sharded = repository.read(PLAIN), repository.read(SHARDED)

    # The branch's head is looked up at most once a second: reopening shows the commit
    # once that second is up.
    shown = wait_for(lambda: mounted_array(branch.path, PLAIN, PLAIN_DTYPE, PLAIN_SHAPE), new_plain,
                     within=icechunk_branches.HEAD_LOOKUP_SECONDS + 5)
    np.testing.assert_array_equal(shown, new_plain)
    np.testing.assert_array_equal(
        mounted_array(branch.path, SHARDED, SHARDED_DTYPE, SHARDED_SHAPE), new_sharded)
    np.testing.assert_array_equal(mounted_array(tag.path, PLAIN, PLAIN_DTYPE, PLAIN_SHAPE), old_plain)
    np.testing.assert_array_equal(
        mounted_array(tag.path, SHARDED, SHARDED_DTYPE, SHARDED_SHAPE), old_sharded)


def wait_for(read, expected: np.ndarray, within: float) -> np.ndarray:
    """Reopen and read until the expected data shows or `within` seconds pass; the last read."""
    deadline = time.monotonic() + within
    while True:
        found = read()
        if np.array_equal(found, expected) or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


@pytest.mark.parametrize(("source", "expected"), [
    ("{url}", "no branch, tag or snapshot named 'nope'"),
    ("icechunk://{tmp}/empty", "not an Icechunk repository"),
    ("icechunk://{tmp}/missing", "no Icechunk repository at"),
])
def test_a_bad_ref_or_a_path_without_a_repository_is_refused_in_one_line(
        repository: Repository, tmp_path: Path, source: str, expected: str) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "mnt").mkdir()
    source = source.format(url=repository.url, tmp=tmp_path)
    result = subprocess.run([ZARRFS, "mount", source, str(tmp_path / "mnt"), "-o", "ref=nope"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"zarrfs: cannot mount {source}: ")
    assert expected in lines[0]


def test_the_mount_is_read_only(repository: Repository, mount_array) -> None:
    mount = mount_array(repository.url)
    with pytest.raises(OSError) as raised, open(mount.path / PLAIN / "data", "r+b") as f:
        f.write(b"\0" * 4)
    assert raised.value.errno in (errno.EROFS, errno.EACCES)
    np.testing.assert_array_equal(mounted_array(mount.path, PLAIN, PLAIN_DTYPE, PLAIN_SHAPE),
                                  repository.read(PLAIN))


def test_a_commit_changes_the_generations_of_the_keys_it_wrote_only(
        repository: Repository, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(icechunk_branches, "HEAD_LOOKUP_SECONDS", 0.0)
    branch, _ = icechunk_store.open_filesystem(repository.url, {}, SourceOptions())
    tag, _ = icechunk_store.open_filesystem(repository.url, {}, SourceOptions(OptionValues({REF: "v1"})))
    keys = ["/plain/zarr.json", "/plain/c/1/0", "/plain/c/0/0", "/sub/sharded/c/0/0",
            "/sub/sharded/c/1/0"]
    before = {key: branch.info(key)["generation"] for key in keys}
    assert len(set(before.values())) == 1

    second = repository.commit("second", plain=((slice(8, 9), slice(0, 1)), 5),
                               sub__sharded=((slice(12, 13), slice(0, 1)), 5.0))
    after = {key: branch.info(key)["generation"] for key in keys}
    changed = {key for key in keys if after[key] != before[key]}
    assert changed == {"/plain/c/1/0", "/sub/sharded/c/1/0"}
    assert after["/plain/c/1/0"] == second
    assert {key: tag.info(key)["generation"] for key in keys} == before
    listed = branch.find("/plain", detail=True)
    assert listed["/plain/c/1/0"]["generation"] == second
    assert listed["/plain/c/1/0"]["size"] == branch.info("/plain/c/1/0")["size"]
    got = branch.cat_versioned("/plain/c/1/0", 0, 3)
    assert (len(got.data), got.generation) == (3, second)


def test_a_repository_on_s3_mounts_at_a_branch_and_a_tag(
        mount_array, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in S3_ENV.items():
        monkeypatch.setenv(name, value)
    with running(S3Server(free_port())) as server:
        repository = create_on_s3(server.endpoint_url, server.bucket, "repos/one")
        old = repository.read(PLAIN)
        repository.commit("second", plain=((slice(0, 3), slice(None)), 42))
        options = [f"endpoint_url={server.endpoint_url}"]
        branch = mount_array(repository.url, options, env=S3_ENV)
        tag = mount_array(repository.url, [*options, "ref=v1"], env=S3_ENV)
        np.testing.assert_array_equal(mounted_array(branch.path, PLAIN, PLAIN_DTYPE, PLAIN_SHAPE),
                                      repository.read(PLAIN))
        np.testing.assert_array_equal(mounted_array(tag.path, PLAIN, PLAIN_DTYPE, PLAIN_SHAPE), old)
        np.testing.assert_array_equal(
            mounted_array(branch.path, SHARDED, SHARDED_DTYPE, SHARDED_SHAPE), repository.read(SHARDED))
        branch.unmount()
        tag.unmount()
