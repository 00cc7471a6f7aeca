"""A slow store is not a silent one (issue 37 part 5): `-o timeout=` bounds each request's
silence, never a whole read. A read of hundreds of chunks through a store that answers
every request slowly takes many times the timeout, and every byte of it arrives; so does one
read of the kernel's that needs requests one after another, more of them than fit in the
timeout; a store that stops answering still fails a read within the timeout
(test_partition_reads.py)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import zarr

from tests.helpers.mounting import Mount, mounted
from tests.helpers.s3_server import S3_ENV
from tests.helpers.slow_s3 import SlowS3, slow_s3

TIMEOUT = 1.0  # -o timeout=: each request's silence
DELAY = 0.15  # each way, each piece of data: a request costs 0.3 s or more, well under TIMEOUT
SHAPE, CHUNKS = (256, 1024), (16, 16)  # 1,024 chunks of 1 KiB


def test_a_read_that_progresses_outlasts_the_timeout(tmp_path: Path) -> None:
    values = (np.arange(SHAPE[0] * SHAPE[1], dtype=np.int64) % 251).astype("u1").reshape(SHAPE)
    with slow_s3(DELAY) as s3:
        zarr.create_array(f"s3://{s3.bucket}/slow", shape=SHAPE, chunks=CHUNKS, dtype="u1",
                          fill_value=0, storage_options=written_through(s3))[...] = values
        with mounted(f"s3://{s3.bucket}/slow", tmp_path / "mnt",
                     [f"endpoint_url={s3.proxy}", f"timeout={TIMEOUT:g}", "ro"], env=S3_ENV) as mount:
            started = time.monotonic()
            data = (mount.path / "data").read_bytes()
            took = time.monotonic() - started
            failed = timeouts(mount)
    assert data == values.tobytes()
    assert failed == 0, f"{failed} requests failed waiting for a store that answered"
    assert took > 3 * TIMEOUT, f"the read took {took:.1f} s: not slow enough to show anything"


def test_one_read_of_requests_in_turn_outlasts_the_timeout(tmp_path: Path) -> None:
    """The kernel's first read of a large shard needs its size, its index, then the inner
    chunks read: three requests in turn, each 1 s through the proxy, in one read under a
    2 s timeout. It failed with EIO after 2 s while the store answered each request in 1."""
    delay, timeout, shape = 0.5, 2.0, (4096, 2048)  # one shard of 8 MiB: not fetched whole
    values = (np.arange(shape[0] * shape[1], dtype=np.int64) % 251).astype("u1").reshape(shape)
    with slow_s3(delay) as s3:
        zarr.create_array(f"s3://{s3.bucket}/sharded", shape=shape, shards=shape, chunks=(64, 64),
                          dtype="u1", fill_value=0, storage_options=written_through(s3))[...] = values
        with mounted(f"s3://{s3.bucket}/sharded", tmp_path / "mnt",
                     [f"endpoint_url={s3.proxy}", f"timeout={timeout:g}", "ro"], env=S3_ENV) as mount:
            with open(mount.path / "data", "rb", buffering=0) as data:
                started = time.monotonic()
                first = data.read(1 << 17)
                took = time.monotonic() - started
            # (the kernel reads again what its read-ahead request failed: count the failures)
            failed = timeouts(mount)
    assert first == values.tobytes()[: 1 << 17]
    assert failed == 0, f"{failed} requests failed waiting for a store that answered"
    assert took > timeout, f"the first read took {took:.1f} s: it needed no requests in turn"


def written_through(s3: SlowS3) -> dict[str, str]:
    """s3fs's options to fill the bucket at the server's own speed."""
    return {"endpoint_url": s3.server, "key": "testing", "secret": "testing"}


def timeouts(mount: Mount) -> int:
    """The mount's FUSE requests that failed waiting for the store (its stats)."""
    return int(json.loads(os.getxattr(mount.path, "user.zarrfs.stats"))["timeouts"])
