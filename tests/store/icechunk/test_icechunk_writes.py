"""Icechunk repositories mounted with -o rw at a branch: what fsync or close makes durable is a
commit, read back with icechunk and zarr-python (the oracle) at each snapshot."""

from __future__ import annotations

import errno
import os
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import zarr

from tests.helpers.icechunk_repos import PLAIN, SHARDED, Repository, create, create_on_s3
from tests.helpers.mounting import ZARRFS
from tests.helpers.s3_server import S3_ENV, S3Server, free_port, running

LAYOUT = {PLAIN: ("<i4", (30, 20)), SHARDED: ("<f8", (40, 12))}


@pytest.fixture
def repository(tmp_path: Path) -> Repository:
    return create(tmp_path / "repo")


def messages(repository: Repository) -> list[str]:
    """The branch's commit messages, newest first."""
    return [snapshot.message for snapshot in repository.repo.ancestry(branch="main")]


def write_elements(mount_path: Path, array: str, values: dict[tuple[int, int], float]) -> None:
    """Write elements of `array`'s data file, then fsync and close it."""
    dtype, shape = LAYOUT[array]
    itemsize = np.dtype(dtype).itemsize
    fd = os.open(mount_path / array / "data", os.O_RDWR)
    try:
        for (row, column), value in values.items():
            os.pwrite(fd, np.array(value, dtype).tobytes(), (row * shape[1] + column) * itemsize)
        os.fsync(fd)
    finally:
        os.close(fd)


def committed(repository: Repository, step: Callable[[], object]) -> list[str]:
    """The messages of the commits `step` made."""
    before = len(messages(repository))
    step()
    return messages(repository)[: len(messages(repository)) - before]


@pytest.mark.fast
def test_each_fsync_of_data_is_one_commit_naming_what_it_wrote(repository: Repository, mount_array) -> None:
    mount = mount_array(repository.url, ["rw"])
    expected = {array: repository.read(array) for array in LAYOUT}
    snapshots = []
    for round_number in range(3):
        plain = {(round_number, 0): 100 + round_number, (20, 15): -round_number}  # chunks c/0/0, c/2/1
        made = committed(repository, lambda plain=plain: write_elements(mount.path, PLAIN, plain))
        assert made == ["zarrfs: plain: 2 chunks"]
        sharded = {(round_number, 1): 0.5 + round_number}
        made = committed(repository, lambda sharded=sharded: write_elements(mount.path, SHARDED, sharded))
        assert made == ["zarrfs: sub/sharded: 1 chunk"]  # (one shard)
        for element, value in plain.items():
            expected[PLAIN][element] = value
        for element, value in sharded.items():
            expected[SHARDED][element] = value
        snapshots.append((repository.repo.lookup_branch("main"), {a: v.copy() for a, v in expected.items()}))
    for snapshot, arrays in snapshots:  # every commit holds what was written up to it
        for array, values in arrays.items():
            np.testing.assert_array_equal(repository.read(array, snapshot_id=snapshot), values)

    # np.memmap: its flush is an msync and the close of the mapping a release: one commit
    # (the mapping's one page is the whole file: every chunk is written back)
    made = committed(repository, lambda: _memmap_rows(mount.path / PLAIN / "data", 7))
    assert made == ["zarrfs: plain: 12 chunks"]
    expected[PLAIN][8:16] = 7
    np.testing.assert_array_equal(repository.read(PLAIN), expected[PLAIN])
    assert mount.unmount() == 0
    assert messages(repository)[0] == made[0]  # (nothing left to commit at unmount)


def _memmap_rows(path: Path, value: int) -> None:
    array = np.memmap(path, dtype="<i4", mode="r+", shape=LAYOUT[PLAIN][1])
    array[8:16] = value
    array.flush()
    del array
    with open(path, "rb") as f:  # (the release of the file's last handle stores and commits)
        os.fsync(f.fileno())


def test_every_operation_that_writes_commits(repository: Repository, mount_array, tmp_path: Path) -> None:
    mount = mount_array(repository.url, ["rw"])
    root = mount.path

    def tree() -> zarr.Group:
        return zarr.open_group(repository.repo.readonly_session(branch="main").store, mode="r")

    assert committed(repository, lambda: os.mkdir(root / "run")) == ["zarrfs: new run"]
    assert tree()["run"].attrs.asdict() == {}

    np.save(tmp_path / "result.npy", np.arange(60, dtype="<f4").reshape(6, 10))
    copy = ["cp", str(tmp_path / "result.npy"), str(root / "run")]
    made = committed(repository, lambda: subprocess.run(copy, check=True))
    assert made[-1] == "zarrfs: new run/result" and made[0] == "zarrfs: run/result: 1 chunk"
    np.testing.assert_array_equal(tree()["run/result"][...], np.arange(60).reshape(6, 10))

    attributes = ["setfattr", "-n", "user.zarr.attributes", "-v", '{"units": "K"}', str(root / "run/result")]
    made = committed(repository, lambda: subprocess.run(attributes, check=True))
    assert made == ["zarrfs: metadata of run/result"]
    assert tree()["run/result"].attrs.asdict() == {"units": "K"}

    made = committed(repository, lambda: os.truncate(root / PLAIN / "data", 10 * 20 * 4))  # 30 rows -> 10
    assert made and all(m.startswith("zarrfs: ") for m in made)
    assert tree()[PLAIN].shape == (10, 20)
    assert tree()[PLAIN].nchunks_initialized == 2 * 3  # (the chunks past the new edge deleted)
    np.testing.assert_array_equal(tree()[PLAIN][...], np.arange(200).reshape(10, 20))

    made = committed(repository, lambda: os.rename(root / "run", root / "final"))
    assert len(made) == 1 and "new final" in made[0] and "deleted run" in made[0]
    np.testing.assert_array_equal(tree()["final/result"][...], np.arange(60).reshape(6, 10))

    made = committed(repository, lambda: subprocess.run(["rm", "-r", str(root / "sub")], check=True))
    assert made and "deleted sub" in made[0]
    assert sorted(tree().keys()) == ["final", PLAIN]
    assert sorted(os.listdir(root)) == [".versions", "data.h5", "data.nc", "final", PLAIN, "zarr.json"]


def test_fsyncs_within_the_group_window_share_commits(repository: Repository, mount_array) -> None:
    # Two arrays, each written and fsynced from its own thread at the same moment: with
    # commit=each they would be two commits; in a window of 5 s (wide enough however loaded
    # the machine) they are one, and each fsync returns once it has landed.
    mount = mount_array(repository.url, ["rw,commit=5"])
    writes = {PLAIN: {(0, 0): 7, (29, 19): 8}, SHARDED: {(39, 11): 0.5}}
    together = threading.Barrier(len(writes))

    def write(array: str) -> None:
        together.wait(timeout=60)
        write_elements(mount.path, array, writes[array])

    writers = [threading.Thread(target=write, args=(array,)) for array in writes]
    made = committed(repository, lambda: [w.start() for w in writers] and [w.join() for w in writers])
    assert made == ["zarrfs: plain: 2 chunks; sub/sharded: 1 chunk"], made
    for array, values in writes.items():
        read = repository.read(array)
        assert {index: read[index] for index in values} == values


def test_another_writers_commit_is_kept_beside_unsaved_writes(repository: Repository, mount_array) -> None:
    mount = mount_array(repository.url, ["rw"])
    expected = repository.read(PLAIN)
    fd = os.open(mount.path / PLAIN / "data", os.O_RDWR)
    try:
        os.pwrite(fd, np.array([-5, -6], "<i4").tobytes(), 0)  # elements [0, 0:2] of chunk c/0/0
        os.fsync(fd)  # (the chunk is read: the next write changes what the mount holds)
        os.pwrite(fd, np.array([-7], "<i4").tobytes(), 4 * 3)  # [0, 3], not saved yet
        # Another writer commits another chunk, and other elements of the same chunk.
        repository.commit("another writer", plain=((slice(1, 2), slice(0, 8)), 99))
        repository.commit("another writer again", plain=((slice(25, 26), slice(None)), 42))
        os.fsync(fd)
    finally:
        os.close(fd)
    expected[0, :2], expected[0, 3], expected[1, :8], expected[25] = [-5, -6], -7, 99, 42
    np.testing.assert_array_equal(repository.read(PLAIN), expected)
    assert messages(repository)[:3] == ["zarrfs: plain: 1 chunk", "another writer again", "another writer"]


@pytest.mark.parametrize("array", [PLAIN, SHARDED])
def test_two_mounts_on_s3_writing_one_chunk_lose_nothing(array: str, mount_array,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in S3_ENV.items():
        monkeypatch.setenv(name, value)
    rounds = 4
    with running(S3Server(free_port())) as server:
        repository = create_on_s3(server.endpoint_url, server.bucket, "repos/two")
        options = [f"rw,endpoint_url={server.endpoint_url}"]
        mounts = [mount_array(repository.url, options, env=S3_ENV) for _ in range(2)]

        def writer(column: int) -> None:
            for row in range(rounds):  # each its own element of chunk 0 (inner chunk 0 of shard 0)
                write_elements(mounts[column].path, array, {(row, column): 1000 + 10 * row + column})

        threads = [threading.Thread(target=writer, args=(column,)) for column in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for mount in mounts:
            assert mount.unmount() == 0
        read = repository.read(array)
        assert [[read[row, column] for column in range(2)] for row in range(rounds)] == [
            [1000 + 10 * row + column for column in range(2)] for row in range(rounds)]
        logs = "".join(mount.log() for mount in mounts)
        assert "ERROR" not in logs, logs  # (no fsync failed: displaced writes were merged again)


def test_a_commit_acknowledged_survives_kill_9(repository: Repository, mount_array) -> None:
    mount = mount_array(repository.url, ["rw"])
    write_elements(mount.path, PLAIN, {(29, 19): 4242})
    mount.process.kill()
    mount.process.wait(timeout=30)
    assert repository.read(PLAIN)[29, 19] == 4242
    assert messages(repository)[0] == "zarrfs: plain: 1 chunk"


@pytest.mark.fast
def test_rw_at_a_tag_is_refused_in_one_line(repository: Repository, tmp_path: Path) -> None:
    (tmp_path / "mnt").mkdir()
    result = subprocess.run([ZARRFS, "mount", repository.url, str(tmp_path / "mnt"), "-o", "rw,ref=v1"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "-o rw needs a branch" in lines[0] and "'v1'" in lines[0]


def test_without_rw_a_branch_is_read_only(repository: Repository, mount_array) -> None:
    mount = mount_array(repository.url)
    with pytest.raises(OSError) as raised, open(mount.path / PLAIN / "data", "r+b") as f:
        f.write(b"\0" * 4)
    assert raised.value.errno == errno.EROFS
    with pytest.raises(OSError) as raised:
        os.mkdir(mount.path / "new")
    assert raised.value.errno == errno.EROFS
    assert messages(repository) == ["first", "Repository initialized"]
