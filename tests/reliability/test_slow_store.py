"""A slow store is not a silent one (issue 37 part 5): `-o timeout=` bounds each request's
silence, never a whole read. A read of hundreds of chunks through a store that answers
every request slowly takes many times the timeout, and every byte of it arrives; a store that
stops answering still fails a read within the timeout (test_partition.py)."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import zarr

from tests.mounting import mounted
from tests.netproxy import proxied
from tests.reliability.s3_server import S3Server

TIMEOUT = 1.0  # -o timeout=: each request's silence
DELAY = 0.15  # each way, each piece of data: a request costs 0.3 s or more, well under TIMEOUT
SHAPE, CHUNKS = (256, 1024), (16, 16)  # 1,024 chunks of 1 KiB


def test_a_read_that_progresses_outlasts_the_timeout(s3_server: S3Server, tmp_path: Path) -> None:
    values = (np.arange(SHAPE[0] * SHAPE[1], dtype=np.int64) % 251).astype("u1").reshape(SHAPE)
    options = {"endpoint_url": s3_server.endpoint_url, "key": "testing", "secret": "testing"}
    zarr.create_array(f"s3://{s3_server.bucket}/slow", shape=SHAPE, chunks=CHUNKS, dtype="u1",
                      fill_value=0, storage_options=options)[...] = values
    with proxied(s3_server.port, delay=DELAY) as proxy, mounted(
            f"s3://{s3_server.bucket}/slow", tmp_path / "mnt",
            [f"endpoint_url={proxy.url}", f"timeout={TIMEOUT:g}", "ro"]) as mount:
        started = time.monotonic()
        data = (mount.path / "data").read_bytes()
        took = time.monotonic() - started
    assert data == values.tobytes()
    assert took > 3 * TIMEOUT, f"the read took {took:.1f} s: not slow enough to show anything"
