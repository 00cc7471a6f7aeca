"""A mount of an array in S3 (s3fs against a local moto server on 127.0.0.1).

Reads equal what zarr-python wrote, writes through the mount are read back by zarr-python and
TensorStore from S3, and when the server goes away mid-run: reads the daemon's cache cannot
answer fail with EIO within a bounded time, a write-back (fsync) fails with EIO and keeps the
data dirty, the daemon keeps answering everything it can answer without the store, and once
the server is back (same port, same objects) reads work again and a second fsync stores the
data."""

from __future__ import annotations

import errno
import os
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers.mounting import Mount, mounted, pread, timed
from tests.helpers.s3_server import S3Server
from zarrfs.store import RetryPolicy

pytestmark = pytest.mark.skipif(
    not os.path.exists("/dev/fuse") or shutil.which("fusermount3") is None,
    reason="needs FUSE (/dev/fuse and fusermount3)",
)
s3fs = pytest.importorskip("s3fs")
zarr = pytest.importorskip("zarr")

SHAPE = (128, 128)
CHUNK = 16
GRID = 8
CHUNK_BYTES = CHUNK * CHUNK * 4
VALUES = (np.arange(SHAPE[0] * SHAPE[1], dtype="<f4").reshape(SHAPE) / 8 + 0.5)
# How long an outage may take to become EIO: the store's retry deadline is checked between
# tries, and one s3fs try of a refused connection includes botocore's own retries with
# backoff (seen here: 10 s for a read, 15-19 s for a put).
EIO_BOUND = RetryPolicy().deadline_seconds + 20
ANSWER_BOUND = 3.0  # what the daemon can answer without the store, it answers this fast


def storage_options(server: S3Server) -> dict[str, Any]:
    return {"endpoint_url": server.endpoint_url, "key": "testing", "secret": "testing"}


def block(values: np.ndarray, i: int, j: int) -> np.ndarray:
    return values[i * CHUNK : (i + 1) * CHUNK, j * CHUNK : (j + 1) * CHUNK]


def read_zarr_python(server: S3Server) -> np.ndarray:
    array = zarr.open_array(f"s3://{server.bucket}/array", mode="r",
                            storage_options=storage_options(server))
    return np.asarray(array[...])


def read_tensorstore(server: S3Server) -> np.ndarray:
    ts = pytest.importorskip("tensorstore")
    spec = {
        "driver": "zarr3",
        "kvstore": {"driver": "s3", "bucket": server.bucket, "path": "array/",
                    "endpoint": server.endpoint_url, "aws_region": "us-east-1",
                    "aws_credentials": {"type": "environment"}},
        "recheck_cached_data": False,
    }
    return np.asarray(ts.open(spec, read=True).result().read().result())


def read_chunk(mount: Mount, i: int, j: int) -> np.ndarray:
    raw = mount.chunk(f"c/{i}/{j}").read_bytes()
    return np.frombuffer(raw, "<f4").reshape(CHUNK, CHUNK)


def test_s3_mount_reads_writes_and_survives_an_outage(s3_server: S3Server, tmp_path: Path) -> None:
    array = zarr.create_array(
        store=f"s3://{s3_server.bucket}/array", shape=SHAPE, chunks=(CHUNK, CHUNK),
        dtype="<f4", fill_value=0, compressors=zarr.codecs.ZstdCodec(level=1),
        storage_options=storage_options(s3_server))
    array[...] = VALUES
    expected = VALUES.copy()

    # direct_io: every read reaches the daemon (no kernel page cache), so "cached" below means
    # the daemon's chunk cache, which holds 8 chunks and the written-mask of the one written
    # (a dirty chunk also keeps which elements were written, to merge them with other writers').
    options = [f"endpoint_url={s3_server.endpoint_url}", f"cache={8 * CHUNK_BYTES + CHUNK * CHUNK}",
               "direct_io"]
    with mounted(f"s3://{s3_server.bucket}/array", tmp_path / "mnt", options) as mount:
        data = np.frombuffer(mount.data.read_bytes(), "<f4").reshape(SHAPE)
        assert np.array_equal(data, VALUES)

        # A write through the mount, fsynced, is in S3 for other readers.
        row = np.linspace(-1, 1, SHAPE[1], dtype="<f4")
        fd = os.open(mount.data, os.O_WRONLY)
        try:
            assert os.pwrite(fd, row.tobytes(), 3 * SHAPE[1] * 4) == SHAPE[1] * 4
            os.fsync(fd)
        finally:
            os.close(fd)
        expected[3] = row
        assert np.array_equal(read_zarr_python(s3_server), expected)
        assert np.array_equal(read_tensorstore(s3_server), expected)

        # The last row of chunks becomes what the cache holds; everything else is evicted.
        for j in range(GRID):
            assert np.array_equal(read_chunk(mount, GRID - 1, j), block(expected, GRID - 1, j))

        s3_server.stop()
        uncached: dict[str, Any] = {}
        writer: dict[str, Any] = {}
        new_block = np.full((CHUNK, CHUNK), -42.25, "<f4")
        threads: list[threading.Thread] = []
        write_fd = os.open(mount.chunk(f"c/{GRID - 1}/6"), os.O_WRONLY)
        try:

            def read_uncached() -> None:
                uncached["result"], uncached["seconds"] = timed(
                    lambda: mount.chunk("c/0/0").read_bytes())

            def write_and_fsync() -> None:
                writer["write"], _ = timed(lambda: os.pwrite(write_fd, new_block.tobytes(), 0))
                writer["fsync"], writer["seconds"] = timed(lambda: os.fsync(write_fd))

            threads += [threading.Thread(target=read_uncached),
                        threading.Thread(target=write_and_fsync)]
            for thread in threads:
                thread.start()
            # While both wait for the store, the daemon answers all it can without it.
            slow = []
            for round_ in range(3):
                time.sleep(1.0)  # not a synchronization: the rounds probe 3 s of the outage
                checks: dict[str, Callable[[], Any]] = {
                    "statfs": lambda: os.statvfs(mount.path),
                    "lookup of a new name": lambda r=round_: os.stat(mount.chunk(f"c/3/{r}")),
                    "cached chunk": lambda: read_chunk(mount, GRID - 1, 7),
                    "cached part of data": lambda: pread(mount.data, 64,
                                                         (SHAPE[0] - 1) * SHAPE[1] * 4),
                }
                for what, check in checks.items():
                    result, seconds = timed(check)
                    if isinstance(result, OSError) or seconds > ANSWER_BOUND:
                        slow.append(f"round {round_}: {what}: {result!r} in {seconds:.1f} s")
                assert mount.process.poll() is None, mount.log()
            for thread in threads:
                thread.join(timeout=EIO_BOUND + 30)
            assert not any(thread.is_alive() for thread in threads), "a request never returned"
            assert not slow, "\n".join(slow)
            assert uncached["seconds"] < EIO_BOUND, uncached
            assert isinstance(uncached["result"], OSError), uncached
            assert uncached["result"].errno == errno.EIO, uncached
            assert writer["write"] == CHUNK_BYTES, writer
            assert isinstance(writer["fsync"], OSError), writer
            assert writer["fsync"].errno == errno.EIO, writer
            assert writer["seconds"] < EIO_BOUND, writer
            assert mount.process.poll() is None, mount.log()
            # The failed write-back kept the data: the mount still shows it.
            assert np.array_equal(read_chunk(mount, GRID - 1, 6), new_block)

            s3_server.start()  # the same port; moto kept the objects
            assert np.array_equal(read_chunk(mount, 0, 0), block(expected, 0, 0))
            os.fsync(write_fd)  # the kept data goes out now
        finally:
            for thread in threads:
                thread.join(timeout=EIO_BOUND + 30)
            os.close(write_fd)
            if not s3_server.running:  # a failure above: let the daemon's final flush work
                s3_server.start()
        block(expected, GRID - 1, 6)[...] = new_block
        assert np.array_equal(read_zarr_python(s3_server), expected)
        data = np.frombuffer(mount.data.read_bytes(), "<f4").reshape(SHAPE)
        assert np.array_equal(data, expected)
        log = mount.log()
    assert mount.process.returncode == 0, log
    assert "Traceback" not in log, log
