"""The disk cache (`-o disk_cache=DIR,disk_cache_size=SIZE`) through real mounts of an Icechunk
repository (chunks served without asking the store, also after a commit and a remount) and
of sharded arrays on moto S3 (inner chunks read alone from a shard cached whole)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from tests.helpers.disk_cache_mounts import CHUNK, GRID, SHAPE, options, whole
from tests.helpers.mounting import MountFactory, mounted, pread
from tests.helpers.mounting import mount_stats as stats
from tests.helpers.s3_server import S3Server
from tests.helpers.scale_arrays import RequestLog, values


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
