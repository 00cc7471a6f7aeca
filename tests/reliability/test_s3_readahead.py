"""Read-ahead priced in requests on S3 (issue 58): behind a proxy that delays every request, a
cold 16 KiB read of `data` of an array of small chunks sends at most twice the GETs TensorStore
sends for the same elements (the chunks they touch), by `pread`, Python's buffered `read` and
`mmap` alike (counted with the daemon's request log, never timed). Before: `mmap` and the
buffered read fetched the whole 1 MiB array, 4,096 GETs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.mounting import mounted
from tests.helpers.netproxy import proxied
from tests.helpers.s3_server import S3Server
from tests.helpers.scale_arrays import RequestLog, chunks_touched, twin_on_s3, values

GRID, CHUNK = (64, 64), (16, 16)
SHAPE = (GRID[0] * CHUNK[0], GRID[1] * CHUNK[1])
SIZE = 16 << 10
FEW = 4  # the array's metadata at the open


READER = {  # (in a child process: a page fault holds this one's interpreter lock, which the
          # proxy's thread needs to pass the daemon's GETs on)
    "pread": "os.pread(os.open(path, os.O_RDONLY), size, offset)",
    "buffered": "(lambda f: (f.seek(offset), f.read(size))[1])(open(path, 'rb'))",
    "mmap": "bytes(mmap.mmap(os.open(path, os.O_RDONLY), 0, prot=mmap.PROT_READ)[offset : offset + size])",
}
READS = [("pread", 1), ("buffered", 2), ("mmap", 3)]


def read_in_child(how: str, path: Path, offset: int, size: int) -> bytes:
    code = (f"import mmap, os, sys; path, offset, size = {str(path)!r}, {offset}, {size}; "
            f"sys.stdout.buffer.write({READER[how]})")
    return subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, timeout=120).stdout


@pytest.fixture
def uploaded(s3_server: S3Server, tmp_path: Path) -> str:
    return twin_on_s3(s3_server, tmp_path, GRID, CHUNK)


def test_cold_small_reads_send_twice_tensorstores_gets_at_most(uploaded: str, s3_server: S3Server,
                                                               tmp_path: Path) -> None:
    log = RequestLog(tmp_path / "requests.log")
    with proxied(s3_server.port, delay=0.005) as proxy, \
            mounted(uploaded, tmp_path / "mnt", [f"endpoint_url={proxy.url}"], env=log.env) as m:
        m.wait_for_log("mounted ")  # (the kernel's window is set then)
        read_before = 0
        for name, quarter in READS:  # (each in rows of chunks none of the others touched)
            offset = SHAPE[0] * quarter // 4 * SHAPE[1] + SHAPE[1] // 2
            log.take()
            data = read_in_child(name, m.data, offset, SIZE)
            requests = log.take()
            first = offset // SHAPE[1]
            flat = values((first, 0), (first + SIZE // SHAPE[1] + 2, SHAPE[1])).tobytes()
            assert data == flat[offset % SHAPE[1] : offset % SHAPE[1] + SIZE], name
            touched = chunks_touched(SHAPE, CHUNK, offset, SIZE)  # (what TensorStore reads)
            assert requests.listed() == 0, f"{name}: {requests.summary()}"
            assert 0 < requests.read() <= 2 * touched, f"{name}: {requests.summary()}"
            # (each open also checks, a HEAD each, what this mount read before: recheck=open)
            rechecked = requests.count("stat")
            assert rechecked <= read_before + FEW, f"{name}: {requests.summary()}"
            assert requests.count() - rechecked <= 2 * touched + FEW, f"{name}: {requests.summary()}"
            read_before += requests.read()
