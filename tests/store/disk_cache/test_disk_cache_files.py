"""The disk cache's entries handed over as files (`CachedOnDisk.open`), as a local store's
files are: through real mounts of a moto S3 server, a remount's stream gives its decoding
processes the cached chunks' files, which they read and check themselves, with zarr-python's
reading of the store as the oracle; a chunk another writer changed between the mounts is
never served stale, nor a damaged entry. Without a mount: an entry opened keeps its bytes
when it is evicted, and one whose object changed is not opened."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import fsspec
import numpy as np
import pytest
import zarr

from tests.helpers.disk_cache_stores import cached_then_reopened
from tests.helpers.mounting import MountFactory
from tests.helpers.mounting import mount_stats as stats
from tests.helpers.s3_server import S3Server, free_port, serving
from zarrfs.store import read_opened

SHAPE, CHUNK = (1024, 2048), (256, 256)  # 32 chunks of 128 KiB: decoded by the processes
CHUNKS = (SHAPE[0] // CHUNK[0]) * (SHAPE[1] // CHUNK[1])


@pytest.fixture
def s3_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[S3Server]:
    yield from serving(S3Server(free_port()), monkeypatch)


@pytest.fixture
def noise(s3_server: S3Server) -> str:
    """A uint16 array of noise (zstd chunks that hardly compress) on S3, written by
    zarr-python; its URL."""
    url = f"s3://{s3_server.bucket}/noise.zarr"
    values = np.random.default_rng(87).integers(0, 1 << 16, SHAPE, dtype=np.uint16)
    zarr.create_array(zarr.storage.FsspecStore.from_url(url, storage_options=s3_server.s3fs_options()),
                      data=values, chunks=CHUNK)
    return url


def as_zarr_reads(server: S3Server, url: str) -> bytes:
    """The array's bytes as zarr-python reads them from the store."""
    array = zarr.open_array(url, mode="r", storage_options=server.s3fs_options())
    return np.ascontiguousarray(array[...]).tobytes()


def options(server: S3Server, cache: Path, *more: str) -> list[str]:
    return [f"endpoint_url={server.endpoint_url}", f"disk_cache={cache}", *more]


def stored_chunk_bytes(server: S3Server, url: str) -> int:
    fs = fsspec.filesystem("s3", **server.s3fs_options())
    return sum(int(info["size"]) for info in fs.find(url.removeprefix("s3://") + "/c", detail=True).values())


def cache_filled(server: S3Server, url: str, cache: Path, mount_array: MountFactory) -> bytes:
    """The array read whole through a first mount, which fills `cache`, then unmounted; its
    bytes, as zarr-python reads them."""
    expected = as_zarr_reads(server, url)
    first = mount_array(url, options(server, cache))
    assert first.data.read_bytes() == expected
    first.unmount()
    return expected


def read_by(pid: int) -> int:
    """The bytes process `pid` has read with read(2) and its kin (sockets' recv not counted)."""
    with open(f"/proc/{pid}/io") as f:
        return int(next(line for line in f if line.startswith("rchar")).split()[1])


def test_a_remount_hands_the_cached_chunks_to_the_decoding_processes_as_files(
        s3_server: S3Server, noise: str, tmp_path: Path, mount_array: MountFactory) -> None:
    cache = tmp_path / "cache"
    expected = cache_filled(s3_server, noise, cache, mount_array)
    second = mount_array(noise, options(s3_server, cache))
    daemon = second.process.pid
    before = read_by(daemon)
    assert second.data.read_bytes() == expected
    read = read_by(daemon) - before
    counted = stats(second)
    assert counted["disk_cache_misses"] == 0 and counted["disk_cache_hits"] >= CHUNKS, counted
    # The daemon read the entries' headers, its index and its requests, none of the chunks'
    # bytes (2.7 KB of 4.2 MB when written): the decoding processes did (they were sent as
    # bytes, read here, before: all of them).
    stored = stored_chunk_bytes(s3_server, noise)
    assert read < stored // 20, f"the daemon read {read} bytes of {stored} stored"


def test_a_chunk_another_writer_changed_between_mounts_is_never_served_stale(
        s3_server: S3Server, noise: str, tmp_path: Path, mount_array: MountFactory) -> None:
    cache = tmp_path / "cache"
    cache_filled(s3_server, noise, cache, mount_array)
    writer = zarr.open_array(noise, mode="r+", storage_options=s3_server.s3fs_options())
    writer[256:512, 1024:1280] = 7  # (chunk 1/4)
    writer[768:1024, 0:256] = 9  # (chunk 3/0: the first of its row)
    second = mount_array(noise, options(s3_server, cache, "cache=1M"))
    assert second.data.read_bytes() == as_zarr_reads(s3_server, noise)
    assert stats(second)["disk_cache_misses"] >= 2
    writer[0:256, 256:512] = 11  # (while mounted: seen at the next open)
    assert second.data.read_bytes() == as_zarr_reads(s3_server, noise)


def test_a_damaged_entry_is_not_served_by_a_decoding_process(
        s3_server: S3Server, noise: str, tmp_path: Path, mount_array: MountFactory) -> None:
    # Damage past the header (which the daemon checks as it opens an entry) is found by the
    # decoding process, which checks what it read: its stream is given up, and the reader's
    # read through the cache finds the entry unsound and reads the store.
    cache = tmp_path / "cache"
    expected = cache_filled(s3_server, noise, cache, mount_array)
    entries = sorted(entry for entry in (cache / "objects").iterdir() if entry.stat().st_size > 100_000)
    assert len(entries) == CHUNKS  # (the chunks', not the metadata's)
    for entry in entries[::3]:
        with open(entry, "r+b") as f:
            f.seek(-1000, os.SEEK_END)
            flipped = f.read(1)[0] ^ 0x10
            f.seek(-1000, os.SEEK_END)
            f.write(bytes([flipped]))
    second = mount_array(noise, options(s3_server, cache, f"log={tmp_path / 'second.log'}"))
    assert second.data.read_bytes() == expected
    assert "failed its checksum" in (tmp_path / "second.log").read_text()


def test_an_opened_entry_keeps_its_bytes_and_a_changed_object_is_not_opened(s3_server: S3Server,
                                                                            tmp_path: Path) -> None:
    stored = {f"c/0/{column}": bytes([column]) * 300_000 for column in range(4)}
    again = cached_then_reopened(s3_server, tmp_path, "line", stored, list(stored))
    reads = again.disk_cache
    assert reads is not None
    reads.rechecking(again, holds=len(stored))
    entries = again.cached_on_disk
    assert entries is not None
    opened = entries.open(list(stored))
    assert set(opened) == set(stored)
    # Evicted under the descriptor (deleted; then another generation cached): what it reads
    # is still the entry's bytes, checked.
    fs = fsspec.filesystem("s3", **s3_server.s3fs_options())
    fs.pipe_file(f"{s3_server.bucket}/line/c/0/1", b"changed" * 1000)
    reads.cache.drop(reads.store, again.path("c/0/1"))
    assert os.fstat(opened["c/0/1"].fd).st_nlink == 0  # (its file is gone)
    again.generations(["c/0/1"])  # (a recheck: the store's new generation is now the current one)
    found = again.read("c/0/1")
    assert found is not None and bytes(found.data) == b"changed" * 1000
    for key, entry in opened.items():
        try:
            data = read_opened(entry.fd, entry.size, entry.offset, entry.crc32c)
            assert data is not None and bytes(data) == stored[key], key
        finally:
            os.close(entry.fd)
    # The object changed: its old entry is not opened, the new one is.
    again.generations(["c/0/1"])
    (entry,) = entries.open(["c/0/1"]).values()
    try:
        found = read_opened(entry.fd, entry.size, entry.offset, entry.crc32c)
        assert found is not None and bytes(found) == b"changed" * 1000
    finally:
        os.close(entry.fd)
