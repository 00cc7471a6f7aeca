"""The disk cache (`-o disk_cache=DIR,disk_cache_size=SIZE`) through real mounts of a moto S3
server: what one mount fetched, the next serves from disk (the daemon's request log counts
what it asked the store), a row or a 1-D run at a time; another writer's change and the
mount's own write are never served stale; a damaged entry is never served."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import fsspec
import numpy as np
import pytest
import zstandard

from tests.helpers.disk_cache_mounts import CHUNK, EXPECTED, GRID, SHAPE, options, whole
from tests.helpers.mounting import MountFactory, pread
from tests.helpers.mounting import mount_stats as stats
from tests.helpers.s3_server import S3Server
from tests.helpers.scale_arrays import RequestLog, values, write_twin


def put_chunk(server: S3Server, key: str, block: np.ndarray) -> None:
    fs = fsspec.filesystem("s3", **server.s3fs_options())
    encoded = zstandard.ZstdCompressor(level=1).compress(block.tobytes())
    fs.pipe_file(f"{server.bucket}/twin.zarr/{key}", encoded)


def test_what_one_mount_fetched_the_next_serves_from_disk(s3_server: S3Server, twin: str, tmp_path: Path,
                                                          mount_array: MountFactory) -> None:
    cache = tmp_path / "cache"
    log = RequestLog(tmp_path / "requests.log")
    first = mount_array(twin, options(s3_server, cache), env=log.env)
    assert whole(first) == EXPECTED
    counted = stats(first)
    assert counted["disk_cache_hits"] == 0 and counted["disk_cache_misses"] >= GRID[0] * GRID[1]
    assert 0 < counted["disk_cache_bytes"] <= 1 << 30
    first.unmount()
    log.take()

    second = mount_array(twin, options(s3_server, cache), env=log.env)
    assert whole(second) == EXPECTED
    requests = log.take()
    # Every chunk from disk; what the store was asked: one listing of the array (its 64
    # chunks fit a listing's page), which vouches for every cached chunk, and the metadata's
    # generation.
    assert requests.read() <= 1 and requests.listed() <= GRID[0] * GRID[1] + 8, requests.summary()
    assert sum(1 for r in requests if r.kind == "list") == 1, requests.summary()
    assert stats(second)["disk_cache_hits"] >= GRID[0] * GRID[1]


def cached_rows(cache: Path) -> set[str]:
    """The rows of chunks ("c/5/") the disk cache in `cache` holds chunks of."""
    import sqlite3

    with contextlib.closing(sqlite3.connect(cache / "index.sqlite")) as index:
        paths = [row[0] for row in index.execute("SELECT path FROM entries")]
    return {path.rsplit("/", 1)[0] for path in paths if "/c/" in path}


def test_a_large_array_is_checked_a_row_at_a_time(s3_server: S3Server, tmp_path: Path,
                                                 mount_array: MountFactory) -> None:
    # 1,024 chunks: more than a listing's page. What a reader reads again after a remount is
    # vouched for by listings of its rows of chunks (and of the rows ahead of it), never by
    # a listing of the array.
    grid, chunk = (32, 32), (256, 256)
    local = write_twin(tmp_path / "big.zarr", grid, chunk)
    fsspec.filesystem("s3", **s3_server.uploading_options()).put(str(local), f"{s3_server.bucket}/big.zarr",
                                                                 recursive=True)
    url, shape = f"s3://{s3_server.bucket}/big.zarr", (grid[0] * chunk[0], grid[1] * chunk[1])
    expected = values((0, 0), shape).tobytes()[: 2 * chunk[0] * shape[1]]  # (two rows of chunks)
    cache, log = tmp_path / "cache", RequestLog(tmp_path / "requests.log")
    first = mount_array(url, options(s3_server, cache, "readahead=0"), env=log.env)
    assert pread(first.data, len(expected), 0) == expected
    first.unmount()
    rows_cached = len(cached_rows(cache))  # (what was read, and read ahead)
    log.take()
    second = mount_array(url, options(s3_server, cache, "readahead=0"), env=log.env)
    assert pread(second.data, len(expected), 0) == expected
    requests = log.take()
    listings = [r for r in requests if r.kind == "list"]
    assert requests.read() == 0, requests.summary()
    assert listings and all(r.objects <= grid[1] for r in listings), requests.summary()
    assert len(listings) <= rows_cached < grid[0], requests.summary()  # (each cached row once, at most)
    assert stats(second)["disk_cache_hits"] >= 2 * grid[1]


@pytest.mark.parametrize("chunks", [64, 2048])
def test_cached_chunks_of_a_1d_array(s3_server: S3Server, tmp_path: Path, mount_array: MountFactory,
                                     chunks: int) -> None:
    # The chunks of a 1-D array have no row. Of an array whose grid fits a listing's page
    # (64 chunks), one listing vouches for every cached chunk; of a larger one (2,048 chunks,
    # a few stored), a chunk read again after a remount is asked about alone: no listing of
    # the array. Either way, no read of the chunk.
    import zarr

    url = f"s3://{s3_server.bucket}/line.zarr"
    line = np.arange(64 * 1024, dtype="<u4")
    where = zarr.storage.FsspecStore.from_url(url, storage_options=s3_server.s3fs_options())
    stored = zarr.create_array(where, shape=(chunks * 1024,), dtype="<u4", chunks=(1024,), compressors=None,
                               fill_value=0)
    stored[: line.size] = line  # (64 chunks of 4 KiB stored)
    cache, log = tmp_path / "cache", RequestLog(tmp_path / "requests.log")
    first = mount_array(url, options(s3_server, cache, "readahead=4"), env=log.env)
    for chunk in range(20, 28):  # (more than a handful cached: what a listing would vouch for)
        assert pread(first.data, 64, 4 * 1024 * chunk) == line[1024 * chunk : 1024 * chunk + 16].tobytes()
    first.unmount()
    log.take()
    second = mount_array(url, options(s3_server, cache, "readahead=4"), env=log.env)
    assert pread(second.data, 64, 4 * 1024 * 20) == line[1024 * 20 : 1024 * 20 + 16].tobytes()
    requests = log.take()
    listings = sum(1 for r in requests if r.kind == "list")
    assert requests.read() == 0 and listings == (1 if chunks <= 990 else 0), requests.summary()
    assert requests.count("stat") <= 4, requests.summary()  # (the metadata's, and the chunk's)
    assert stats(second)["disk_cache_hits"] >= 1


def test_another_writers_change_is_seen_at_the_next_open(s3_server: S3Server, twin: str, tmp_path: Path,
                                                         mount_array: MountFactory) -> None:
    cache = tmp_path / "cache"
    first = mount_array(twin, options(s3_server, cache))
    assert whole(first) == EXPECTED
    first.unmount()
    changed = np.full(CHUNK, 7, np.uint8)
    put_chunk(s3_server, "c/2/3", changed)  # (between two mounts)
    expected = values((0, 0), SHAPE)
    expected[128:192, 192:256] = 7
    # A small memory cache: chunks are read again through the disk cache, not kept in memory.
    second = mount_array(twin, options(s3_server, cache, "cache=1M"))
    assert whole(second) == expected.tobytes()
    put_chunk(s3_server, "c/5/1", changed)  # (while mounted: seen at the next open)
    expected[320:384, 64:128] = 7
    assert whole(second) == expected.tobytes()


def test_the_mounts_own_write_is_never_served_stale(s3_server: S3Server, twin: str, tmp_path: Path,
                                                    mount_array: MountFactory) -> None:
    cache = tmp_path / "cache"
    mount = mount_array(twin, options(s3_server, cache, "cache=1M", "rw"))
    assert whole(mount) == EXPECTED
    expected = values((0, 0), SHAPE)
    expected[10, :] = 200
    with open(mount.data, "r+b") as f:
        f.seek(10 * SHAPE[1])
        f.write(bytes([200]) * SHAPE[1])
        f.flush()
        os.fsync(f.fileno())
    assert whole(mount) == expected.tobytes()
    mount.unmount()
    again = mount_array(twin, options(s3_server, cache))
    assert whole(again) == expected.tobytes()


def test_a_damaged_entry_is_not_served(s3_server: S3Server, twin: str, tmp_path: Path,
                                       mount_array: MountFactory) -> None:
    cache = tmp_path / "cache"
    first = mount_array(twin, options(s3_server, cache))
    assert whole(first) == EXPECTED
    first.unmount()
    entries = sorted((cache / "objects").iterdir())
    assert len(entries) >= GRID[0] * GRID[1]
    for i, entry in enumerate(entries):
        damaged = bytearray(entry.read_bytes())
        if i % 2:
            damaged[-1] ^= 0x40  # (a flipped bit in the data)
        else:
            damaged = damaged[: len(damaged) // 2]  # (torn)
        entry.write_bytes(damaged)
    second = mount_array(twin, options(s3_server, cache, f"log={tmp_path / 'second.log'}"))
    assert whole(second) == EXPECTED
    assert stats(second)["disk_cache_misses"] >= GRID[0] * GRID[1]
    assert "failed its checksum" in (tmp_path / "second.log").read_text()
