"""Real scale on S3 (issue 37): a small read of `data` and the close-to-open check of the next
open cost store requests in proportion to what they touch, not to the array's 4,096 chunks
(counted with the daemon's request log). Before: the read fetched every chunk from its row to
the end of the array, and the next open listed the whole array."""

from __future__ import annotations

import os
from pathlib import Path

from tests.helpers.mounting import mounted, pread
from tests.helpers.s3_server import S3Server
from tests.helpers.scale_arrays import RequestLog, chunks_touched, twin_on_s3, values

GRID, CHUNK = (64, 64), (16, 16)
SHAPE = (GRID[0] * CHUNK[0], GRID[1] * CHUNK[1])
FEW = 16
KIB = 1 << 10


def test_a_small_read_and_the_next_open_cost_what_they_touch(s3_server: S3Server, tmp_path: Path) -> None:
    twin_on_s3(s3_server, tmp_path, GRID, CHUNK)
    log = RequestLog(tmp_path / "requests.log")
    with mounted(f"s3://{s3_server.bucket}/twin.zarr", tmp_path / "mnt",
                 [f"endpoint_url={s3_server.endpoint_url}"], env=log.env) as m:
        log.take()
        offset, size = SHAPE[0] // 2 * SHAPE[1] + SHAPE[1] // 2, 16 * KIB
        data = pread(m.data, size, offset)
        read = log.take()
        # (the kernel may widen a read to 128 KiB: -o readahead, its window at a random read)
        touched = chunks_touched(SHAPE, CHUNK, offset - offset % (128 * KIB), 128 * KIB)
        assert read.listed() == 0 and 0 < read.read() <= touched, read.summary()
        first = offset // SHAPE[1]
        flat = values((first, 0), (first + size // SHAPE[1] + 2, SHAPE[1])).tobytes()
        assert data == flat[offset % SHAPE[1] : offset % SHAPE[1] + size]

        assert pread(m.data, size, offset) == data  # a new open: close-to-open
        recheck = log.take()
        assert recheck.listed() == 0 and recheck.count() <= read.read() + FEW, recheck.summary()
        assert os.path.getsize(m.data) == SHAPE[0] * SHAPE[1]
