"""Changes to a mount of S3 through a network partition (the proxy between moto and the mount
swallows every byte: tests/reliability/test_partition_reads.py): with `-o timeout=T` a write is
accepted into the cache and its fsync fails with EIO within T, the data kept dirty (also the
rest of a shard written into); once the network heals, the next fsync stores it, without a
remount. Metadata edits fail within the timeout and work after; uploads, deletes and moves
leave the store as it was.

Each runs in both logging configurations an operator has: the daemon forked with no log
destination (no `log=`, no syslog in a container: it logs nowhere), and `-o log=FILE`."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import s3fs

from tests.helpers.mounting import Mount, pread, timed
from tests.helpers.netproxy import TcpProxy, proxied
from tests.helpers.partition_mounts import (
    AT_ONCE,
    CHUNKS,
    RECHECK_BOUND,
    SHAPE,
    SLACK,
    TIMEOUT,
    VALUES,
    assert_eio,
    assert_logged,
    mount_stats_dirty,
    mounted_logging,
    read_array,
    storage_options,
)
from tests.helpers.s3_server import S3Server

zarr = pytest.importorskip("zarr")


def test_a_write_during_a_partition_is_kept_and_stored_once_it_heals(
        partitioned: tuple[Mount, TcpProxy, S3Server]) -> None:
    mount, proxy, server = partitioned
    cached = mount.path / "cached" / "data"
    row = np.full(SHAPE[1], 7.25, dtype="<f4")
    fd = os.open(cached, os.O_WRONLY)
    try:
        proxy.swallow()
        written, took = timed(lambda: os.pwrite(fd, row.tobytes(), 5 * SHAPE[1] * 4))
        assert written == row.nbytes
        assert took < RECHECK_BOUND + SLACK
        failed, took = timed(lambda: os.fsync(fd))
        assert_eio(failed)
        assert took < TIMEOUT + SLACK
        # Still dirty, and still what the mount shows.
        assert pread(cached, row.nbytes, 5 * SHAPE[1] * 4) == row.tobytes()
        assert mount_stats_dirty(mount) > 0

        proxy.heal()
        stored, took = timed(lambda: os.fsync(fd))
        assert stored is None, stored
    finally:
        os.close(fd)
    expected = VALUES["cached"].copy()
    expected[5] = row
    # Read from S3 directly, not through the proxy or the mount.
    on_s3 = zarr.open_array(f"s3://{server.bucket}/group/cached", mode="r",
                            storage_options=storage_options(server))
    assert np.array_equal(np.asarray(on_s3[...]), expected)
    # Uncached reads work again without a remount.
    assert np.array_equal(read_array(mount, "uncached"), VALUES["uncached"])


def test_a_write_into_a_shard_during_a_partition_keeps_the_rest_of_the_shard(
        s3_server: S3Server, tmp_path: Path, logging_to: str) -> None:
    """A write into part of a shard nothing was read from: the write-back needs the stored
    shard (to keep its other inner chunks), which the partition withholds; the fsync fails
    within the timeout, the data stays dirty, and once healed the shard is stored whole."""
    values = np.arange(SHAPE[0] * SHAPE[1], dtype="<f4").reshape(SHAPE)
    on_s3 = zarr.create_array(f"s3://{s3_server.bucket}/sharded", shape=SHAPE, shards=(64, 128),
                              chunks=CHUNKS, dtype="<f4", fill_value=0,
                              storage_options=storage_options(s3_server))
    on_s3[...] = values
    row = np.full(SHAPE[1] // 2, -3.5, dtype="<f4")  # (half a row: partial inner chunks)
    where = (5 * SHAPE[1] + 16) * 4
    with proxied(s3_server.port) as proxy, mounted_logging(
            logging_to, f"s3://{s3_server.bucket}/sharded", tmp_path / "mnt",
            [f"endpoint_url={proxy.url}", f"timeout={TIMEOUT:g}", "direct_io"]) as mount:
        data = mount.path / "data"
        fd = os.open(data, os.O_WRONLY)
        try:
            proxy.swallow()
            written, took = timed(lambda: os.pwrite(fd, row.tobytes(), where))
            assert written == row.nbytes
            assert took < AT_ONCE + SLACK
            failed, took = timed(lambda: os.fsync(fd))
            assert_eio(failed)
            assert took < TIMEOUT + SLACK
            assert mount_stats_dirty(mount) > 0
            assert pread(data, row.nbytes, where) == row.tobytes()  # (what the mount shows)

            proxy.heal()
            stored, took = timed(lambda: os.fsync(fd))
            assert stored is None, stored
        finally:
            os.close(fd)
        assert mount_stats_dirty(mount) == 0
    expected = values.copy()
    expected[5, 16 : 16 + row.size] = row
    reread = zarr.open_array(f"s3://{s3_server.bucket}/sharded", mode="r",
                             storage_options=storage_options(s3_server))
    assert np.array_equal(np.asarray(reread[...]), expected)


def test_metadata_edits_during_a_partition_fail_within_the_timeout_and_work_after(
        partitioned: tuple[Mount, TcpProxy, S3Server], logging_to: str) -> None:
    mount, proxy, server = partitioned
    data = mount.path / "cached" / "data"
    size = data.stat().st_size
    grown = size + SHAPE[1] * 4 * CHUNKS[0]  # (a row of chunks more)
    edits = {
        "resize": lambda: os.truncate(data, grown),
        "attributes": lambda: os.setxattr(mount.path / "cached", "user.zarr.attributes", b'{"x": 1}'),
        "group": lambda: os.mkdir(mount.path / "made"),
    }
    proxy.swallow()
    for name, edit in edits.items():
        failed, took = timed(edit)
        assert_eio(failed)
        # (a new name is first looked for among other writers' changes: the recheck bound)
        assert took < TIMEOUT + (RECHECK_BOUND if name == "group" else 0) + SLACK, name
    assert data.stat().st_size == size  # (nothing changed)
    assert sorted(os.listdir(mount.path)) == ["cached", "data.h5", "data.nc", "uncached", "zarr.json"]
    # The request's deadline and its store call's are the same 4 s: either may fire first, and
    # the line names the operation (and the key when the store call's fired).
    assert_logged(mount, logging_to,
                  rf"ERROR setattr: (store key '\S+': )?no answer (from the store )?within {TIMEOUT:g} s")

    proxy.heal()
    for name, edit in edits.items():
        done, _ = timed(edit)
        assert done is None, (name, done)
    group = zarr.open_group(f"s3://{server.bucket}/group", mode="r", storage_options=storage_options(server))
    assert group["cached"].shape == (SHAPE[0] + CHUNKS[0], SHAPE[1])
    assert dict(group["cached"].attrs) == {"x": 1}
    assert "made" in set(group.group_keys())


def test_uploads_deletes_and_moves_during_a_partition_leave_the_store_as_it_was(
        partitioned: tuple[Mount, TcpProxy, S3Server], tmp_path: Path) -> None:
    """Each fails with EIO in bounded time and changes no key in the store: no array made
    half, deleted half or moved half."""
    mount, proxy, server = partitioned
    upload = tmp_path / "up.npy"
    np.save(upload, np.arange(512 * 64, dtype="<f4").reshape(512, 64))
    fs = s3fs.S3FileSystem(**storage_options(server))

    def stored() -> dict[str, str]:
        fs.invalidate_cache()
        return {path: info["ETag"] for path, info in fs.find(f"{server.bucket}/group", detail=True).items()}

    before = stored()
    os.listdir(mount.path / "uncached")  # (listed before: rm -r needs its names)
    proxy.swallow()
    for name, action in {"upload": lambda: shutil.copyfile(upload, mount.path / "up.npy"),
                         "delete": lambda: shutil.rmtree(mount.path / "uncached"),
                         "move": lambda: os.rename(mount.path / "cached", mount.path / "moved")}.items():
        failed, took = timed(action)
        assert isinstance(failed, OSError), (name, failed)
        # (an upload is refused at its first write, its retries and its close: a few timeouts)
        assert took < 3 * (TIMEOUT + SLACK) + RECHECK_BOUND, (name, took)
    assert stored() == before
    proxy.heal()
    assert sorted(os.listdir(mount.path)) == ["cached", "data.h5", "data.nc", "uncached", "zarr.json"]
    assert np.array_equal(read_array(mount, "uncached"), VALUES["uncached"])
    assert stored() == before
