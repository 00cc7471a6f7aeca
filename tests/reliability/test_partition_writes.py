"""The partition promise for every write (docs/remote.md): a write into a chunk or shard the
mount does not have, even one a read is waiting for (or has just failed on) with the store
silent, is accepted at once into the cache; fsync fails with EIO within the timeout while the
store is silent, and the next fsync after the heal stores the written elements merged with
the stored chunk."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import zarr

from tests.helpers.mounting import pread, timed
from tests.helpers.netproxy import proxied
from tests.helpers.partition_mounts import (
    AT_ONCE,
    SHAPE,
    SLACK,
    TIMEOUT,
    assert_eio,
    mount_stats_dirty,
    mounted_logging,
    storage_options,
)
from tests.helpers.s3_server import S3Server


@pytest.mark.parametrize("shards", [None, (64, 128)], ids=["chunks", "shards"])
def test_a_write_while_a_read_of_its_chunk_waits_on_the_store_is_accepted_at_once(
        s3_server: S3Server, tmp_path: Path, logging_to: str, shards: tuple[int, int] | None) -> None:
    """The write does not wait for the read's load (which fails after the timeout): it is
    kept as the written elements of the chunk, merged with the stored chunk at the fsync
    after the heal."""
    values = np.arange(SHAPE[0] * SHAPE[1], dtype="<f4").reshape(SHAPE) - 0.25
    on_s3 = zarr.create_array(f"s3://{s3_server.bucket}/a", shape=SHAPE, shards=shards, chunks=(32, 32),
                              dtype="<f4", fill_value=0, storage_options=storage_options(s3_server))
    on_s3[...] = values
    part = np.full(8, 9.75, dtype="<f4")
    where = (70 * SHAPE[1] + 100) * 4  # chunk (2, 3)
    with proxied(s3_server.port) as proxy, mounted_logging(
            logging_to, f"s3://{s3_server.bucket}/a", tmp_path / "mnt",
            [f"endpoint_url={proxy.url}", f"timeout={TIMEOUT:g}", "direct_io"]) as mount:
        data = mount.path / "data"
        fd = os.open(data, os.O_RDWR)
        read: list[object] = []
        try:
            proxy.swallow()
            # (a read as cat's: many chunks loaded at once, this one among them)
            reader = threading.Thread(target=lambda: read.append(timed(lambda: pread(data, 1 << 20, 0))))
            reader.start()
            time.sleep(1.0)  # (the read waits on the store)
            written, took = timed(lambda: os.pwrite(fd, part.tobytes(), where))
            assert written == part.nbytes, written
            assert took < AT_ONCE + SLACK
            reader.join(TIMEOUT + 10)
            assert read and isinstance(read[0], tuple)
            assert_eio(read[0][0])
            assert pread(data, part.nbytes, where) == part.tobytes()
            failed, took = timed(lambda: os.fsync(fd))
            assert_eio(failed)
            assert took < TIMEOUT + SLACK

            proxy.heal()
            stored, _ = timed(lambda: os.fsync(fd))
            assert stored is None, stored
        finally:
            os.close(fd)
        assert mount_stats_dirty(mount) == 0
        expected = values.copy()
        expected[70, 100 : 100 + part.size] = part
        assert np.array_equal(np.frombuffer(data.read_bytes(), "<f4").reshape(SHAPE), expected)
    reread = zarr.open_array(f"s3://{s3_server.bucket}/a", mode="r",
                             storage_options=storage_options(s3_server))
    assert np.array_equal(np.asarray(reread[...]), expected)
