"""A daemon killed (-9) while it fills its disk cache leaves nothing that is ever served wrong:
a fresh mount on the same directory serves every byte as the store holds it, and the index
accounts for every file (the dead writer's claims and temporaries are cleaned up)."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from pathlib import Path

import numpy as np
import zarr

from tests.helpers.mounting import mounted
from tests.helpers.s3_server import S3Server

MIB = 1 << 20
# When each daemon is killed: once this many entries are on disk, or (None) once the cache
# is full and a first entry has been evicted to make room.
ROUNDS = (12, 60, 95, None)


def test_a_daemon_killed_while_it_fills_the_cache_leaves_nothing_wrong(s3_server: S3Server,
                                                                         tmp_path: Path) -> None:
    url = f"s3://{s3_server.bucket}/noise.zarr"
    # 12 MiB of 64 KiB chunks that do not compress, through a cache of 8 MiB: entries are
    # written and evicted while the daemon dies.
    noise = np.random.default_rng(9).integers(0, 255, (3072, 4096), dtype=np.uint8)
    zarr.create_array(zarr.storage.FsspecStore.from_url(url, storage_options=s3_server.s3fs_options()),
                      data=noise, chunks=(128, 512), compressors=None)
    cache = tmp_path / "cache"
    options = [f"endpoint_url={s3_server.endpoint_url}", f"disk_cache={cache}", "disk_cache_size=8M",
               "cache=1M"]
    for round, entries in enumerate(ROUNDS):
        with mounted(url, tmp_path / f"mnt{round}", options) as mount:
            reader = threading.Thread(target=_read_until_it_fails, args=(mount.data,))
            reader.start()
            if entries is None:
                _wait_for_an_eviction(cache / "objects")
            else:
                _wait_for_entries(cache / "objects", entries)
            mount.process.kill()
            mount.process.wait(timeout=10)
            reader.join(timeout=30)
    with mounted(url, tmp_path / "fresh", options) as fresh:
        assert fresh.data.read_bytes() == noise.tobytes()
        assert fresh.data.read_bytes() == noise.tobytes()  # (now from the cache)
    files = {p.name for p in (cache / "objects").iterdir()}
    with contextlib.closing(sqlite3.connect(cache / "index.sqlite")) as index:
        rows = {name for (name,) in index.execute("SELECT name FROM entries WHERE owner IS NULL")}
        claimed = index.execute("SELECT count(*) FROM entries WHERE owner IS NOT NULL").fetchone()[0]
    assert not any(name.endswith(".part") for name in files)
    assert files <= rows and claimed == 0


def _read_until_it_fails(path: Path) -> None:
    with contextlib.suppress(OSError):  # (the daemon is killed under it: ENOTCONN)
        path.read_bytes()


def _wait_for_an_eviction(directory: Path, patience: float = 60.0) -> None:
    before = {p.name for p in directory.iterdir()}
    deadline = time.monotonic() + patience
    while before <= {p.name for p in directory.iterdir()}:
        assert time.monotonic() < deadline, f"nothing evicted from {directory}"
        time.sleep(0.005)


def _wait_for_entries(directory: Path, count: int, patience: float = 60.0) -> None:
    deadline = time.monotonic() + patience
    while not directory.is_dir() or sum(1 for _ in directory.iterdir()) < count:
        assert time.monotonic() < deadline, f"fewer than {count} entries in {directory}"
        time.sleep(0.005)
