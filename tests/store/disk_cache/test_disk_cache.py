"""The disk cache (`-o disk_cache=DIR,disk_cache_size=SIZE`) through real mounts of a moto S3
server and of an Icechunk repository: what one mount fetched, the next serves from disk (the
daemon's request log counts what it asked the store); DIR never holds more than SIZE while
readers fill it; two daemons share it; another writer's change and the mount's own write are
never served stale; a damaged entry is never served; a fault of the cache fails no read."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fsspec
import numpy as np
import pytest
import zstandard

from tests.helpers.mounting import ZARRFS, Mount, MountFactory, mounted, pread
from tests.helpers.mounting import mount_stats as stats
from tests.helpers.s3_server import S3Server, free_port, serving
from tests.helpers.scale_arrays import RequestLog, twin_on_s3, values, write_twin

GRID, CHUNK = (8, 8), (64, 64)
SHAPE = (GRID[0] * CHUNK[0], GRID[1] * CHUNK[1])
MIB = 1 << 20


@pytest.fixture
def s3_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[S3Server]:
    yield from serving(S3Server(free_port()), monkeypatch)


@pytest.fixture
def twin(s3_server: S3Server, tmp_path: Path) -> str:
    """A 512 x 512 uint8 array of 8 x 8 chunks on S3 (`scale_arrays.values`); its URL."""
    return twin_on_s3(s3_server, tmp_path, GRID, CHUNK)


def options(server: S3Server, directory: Path, *more: str) -> list[str]:
    return [f"endpoint_url={server.endpoint_url}", f"disk_cache={directory}", *more]


def whole(mount: Mount) -> bytes:
    return mount.data.read_bytes()


def put_chunk(server: S3Server, key: str, block: np.ndarray) -> None:
    fs = fsspec.filesystem("s3", **server.s3fs_options())
    encoded = zstandard.ZstdCompressor(level=1).compress(block.tobytes())
    fs.pipe_file(f"{server.bucket}/twin.zarr/{key}", encoded)


EXPECTED = values((0, 0), SHAPE).tobytes()


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


def du(directory: Path) -> int:
    """What `du` says `directory` takes on disk, in bytes."""
    # (du says what it could: a file deleted while it walks is not counted, and it exits 1)
    found = subprocess.run(["du", "-s", "-B1", str(directory)], capture_output=True, text=True)
    return int(found.stdout.split()[0])


def test_two_daemons_fill_one_directory_within_its_size(s3_server: S3Server, tmp_path: Path,
                                                        mount_array: MountFactory) -> None:
    """Uncompressible chunks of 256 KiB, 24 MiB of them, read by two daemons at once with a
    cache of 8 MiB: du never says more than 8 MiB; what both read is right."""
    url, noise = noise_array(s3_server)
    cache, size = tmp_path / "cache", 8 * MIB
    mounts = [mount_array(url, options(s3_server, cache, f"disk_cache_size={size}", "cache=1M"))
              for _ in range(2)]
    done = threading.Event()
    sizes: list[int] = []

    def watch() -> None:
        while not done.is_set():
            sizes.append(du(cache))

    watcher = threading.Thread(target=watch)
    watcher.start()
    results: list[bytes] = []
    try:
        readers = [threading.Thread(target=lambda m=m: results.append(whole(m))) for m in mounts * 2]
        for reader in readers:
            reader.start()
        for reader in readers:
            reader.join()
    finally:
        done.set()
        watcher.join()
    assert results == [noise.tobytes()] * 4
    assert len(sizes) > 5 and max(sizes) <= size, (max(sizes), len(sizes))
    assert all(stats(m)["disk_cache_bytes"] <= size for m in mounts)


def test_a_daemon_uses_what_another_cached(s3_server: S3Server, twin: str, tmp_path: Path,
                                           mount_array: MountFactory) -> None:
    cache = tmp_path / "cache"
    log = RequestLog(tmp_path / "requests.log")
    first = mount_array(twin, options(s3_server, cache))
    second = mount_array(twin, options(s3_server, cache), env=log.env)
    assert whole(first) == EXPECTED
    log.take()
    assert whole(second) == EXPECTED
    requests = log.take()
    assert requests.read() <= 1, requests.summary()
    assert stats(second)["disk_cache_hits"] >= GRID[0] * GRID[1]


def test_a_cache_directory_removed_while_mounted_fails_no_read(s3_server: S3Server, tmp_path: Path,
                                                               mount_array: MountFactory) -> None:
    url, noise = noise_array(s3_server)  # (24 MiB: more than read ahead before the removal)
    cache = tmp_path / "cache"
    mount = mount_array(url, options(s3_server, cache, "cache=1M", f"log={tmp_path / 'daemon.log'}"))
    assert pread(mount.data, 2048 * 256, 0) == noise[:256].tobytes()  # (a row of chunks)
    # (moved away first: the daemon may be adding entries while rmtree walks the directory)
    shutil.rmtree(cache.rename(tmp_path / "removed"), ignore_errors=True)
    assert not cache.exists()
    assert whole(mount) == noise.tobytes()
    warnings = [line for line in (tmp_path / "daemon.log").read_text().splitlines() if "disk cache" in line]
    assert 1 <= len(warnings) <= 3, warnings  # (once for each kind of fault)


def noise_array(server: S3Server) -> tuple[str, np.ndarray]:
    """24 MiB that do not compress, in chunks of 256 KiB, on S3: its URL and values."""
    import zarr

    url = f"s3://{server.bucket}/noise.zarr"
    noise = np.random.default_rng(5).integers(0, 255, (3072, 2048), dtype=np.uint8)
    zarr.create_array(zarr.storage.FsspecStore.from_url(url, storage_options=server.s3fs_options()),
                      data=noise, chunks=(256, 256), compressors=None)
    return url, noise


@pytest.mark.parametrize("make", ["a file", "a directory of other files"])
def test_a_bad_cache_directory_fails_the_mount_in_one_line(s3_server: S3Server, twin: str, tmp_path: Path,
                                                           make: str) -> None:
    bad = tmp_path / "bad"
    if make == "a file":
        bad.write_text("x")
    else:
        bad.mkdir()
        (bad / "notes.txt").write_text("mine")
    (tmp_path / "mnt").mkdir()
    result = subprocess.run([ZARRFS, "mount", twin, str(tmp_path / "mnt"), "-o",
                             ",".join(options(s3_server, bad))], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "disk cache" in lines[0] and "Traceback" not in result.stderr, result.stderr
    assert not os.path.ismount(tmp_path / "mnt")


def icechunk_read_once(tmp_path: Path) -> tuple[Any, np.ndarray, str, Path]:
    """An Icechunk repository of one array `a`, read whole through a mount with a disk cache:
    the repository, the array's values, its URL and the cache's directory."""
    import icechunk
    import zarr

    repository = icechunk.Repository.create(icechunk.local_filesystem_storage(str(tmp_path / "repo")))
    session = repository.writable_session("main")
    expected = values((0, 0), SHAPE)
    zarr.create_array(session.store, name="a", data=expected, chunks=CHUNK)
    session.commit("an array")
    url, cache = f"icechunk://{tmp_path / 'repo'}", tmp_path / "cache"
    with mounted(url, tmp_path / "first", [f"disk_cache={cache}"]) as first:
        assert (first.path / "a" / "data").read_bytes() == expected.tobytes()
    return repository, expected, url, cache


def test_icechunk_chunks_are_served_without_asking_the_store(tmp_path: Path,
                                                             mount_array: MountFactory) -> None:
    _, expected, url, cache = icechunk_read_once(tmp_path)
    log = RequestLog(tmp_path / "requests.log")
    second = mount_array(url, [f"disk_cache={cache}"], env=log.env)
    log.take()
    assert (second.path / "a" / "data").read_bytes() == expected.tobytes()
    requests = log.take()
    assert requests.read() == 0 and len(requests) <= 4, requests.summary()
    assert stats(second)["disk_cache_hits"] >= GRID[0] * GRID[1]


def test_an_icechunk_remount_after_a_commit_reads_what_the_commit_left_from_the_cache(
        tmp_path: Path, mount_array: MountFactory) -> None:
    """Entries are keyed by the snapshot their keys last changed in: a mount at a newer head
    diffs the two snapshots once, and reads from the cache every chunk the commits since
    left as it was (before, a new head made every entry a miss)."""
    import zarr

    repository, expected, url, cache = icechunk_read_once(tmp_path)
    session = repository.writable_session("main")
    zarr.open_array(session.store, path="a")[: CHUNK[0], : CHUNK[1]] = 7  # (one chunk)
    session.commit("one chunk")
    expected[: CHUNK[0], : CHUNK[1]] = 7
    second = mount_array(url, [f"disk_cache={cache}"])
    assert (second.path / "a" / "data").read_bytes() == expected.tobytes()
    counted = stats(second)
    assert counted["disk_cache_misses"] == 1, counted
    assert counted["disk_cache_hits"] >= GRID[0] * GRID[1] - 1, counted


def sharded_array(server: S3Server) -> tuple[str, np.ndarray]:
    """8 MiB of uint16 in four shards of 1024 x 1024 (16 inner chunks of 256 x 256, zstd) on
    S3: its URL and values."""
    import zarr

    url = f"s3://{server.bucket}/sharded.zarr"
    data = np.random.default_rng(7).integers(0, 1000, (2048, 2048), dtype=np.uint16)
    zarr.create_array(zarr.storage.FsspecStore.from_url(url, storage_options=server.s3fs_options()),
                      data=data, chunks=(256, 256), shards=(1024, 1024))
    return url, data


def test_inner_chunks_are_read_alone_from_a_shard_cached_whole(s3_server: S3Server, tmp_path: Path,
                                                              mount_array: MountFactory) -> None:
    url, data = sharded_array(s3_server)
    cache = tmp_path / "cache"
    first = mount_array(url, options(s3_server, cache))
    assert whole(first) == data.tobytes()  # (a reader going through: shards fetched whole)
    first.unmount()
    assert len(list((cache / "objects").iterdir())) == 4 + 1  # (and zarr.json)
    # A small memory cache: shards are no longer fetched whole, but their index, then each
    # inner chunk by its own byte range, all read from the shards' entries.
    log = RequestLog(tmp_path / "requests.log")
    second = mount_array(url, options(s3_server, cache, "cache=1M"), env=log.env)
    log.take()
    assert whole(second) == data.tobytes()
    requests = log.take()
    assert requests.read() == 0, requests.summary()
    assert stats(second)["disk_cache_hits"] >= 4 * 16
    second.unmount()
    for entry in (cache / "objects").iterdir():  # (a flipped bit in every 256 KiB of data)
        damaged = bytearray(entry.read_bytes())
        for at in range(len(damaged) - 1, 0, -(256 << 10)):
            damaged[at] ^= 0x40
        entry.write_bytes(damaged)
    daemon_log = tmp_path / "third.log"
    third = mount_array(url, options(s3_server, cache, "cache=1M", f"log={daemon_log}"), env=log.env)
    log.take()
    row = data.shape[1] * 2
    assert pread(third.data, 2 * row, 300 * row) == data[300:302].tobytes()
    requests = log.take()
    assert requests.read() >= 2, requests.summary()  # (the index and inner chunks, from the store)
    assert "failed its checksum" in daemon_log.read_text()


def test_a_reader_of_shards_cached_whole_reads_what_it_needs_of_them(s3_server: S3Server, tmp_path: Path,
                                                                     mount_array: MountFactory) -> None:
    url, data = sharded_array(s3_server)
    cache = tmp_path / "cache"
    first = mount_array(url, options(s3_server, cache))
    assert whole(first) == data.tobytes()
    first.unmount()
    shard_bytes = min(e.stat().st_size for e in (cache / "objects").iterdir() if e.stat().st_size > 1 << 20)
    # A reader of two rows of pixels: not their two shards whole from disk, as from the
    # store, but the shards' indexes and the eight inner chunks holding the rows.
    log = RequestLog(tmp_path / "requests.log")
    second = mount_array(url, options(s3_server, cache), env=log.env)
    log.take()
    row = data.shape[1] * 2
    assert pread(second.data, 2 * row, 300 * row) == data[300:302].tobytes()
    requests = log.take()
    assert requests.read() == 0, requests.summary()
    fetched = stats(second)["bytes_fetched"]
    assert 0 < fetched < shard_bytes, (fetched, shard_bytes)
