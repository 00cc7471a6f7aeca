"""The disk cache's directory itself (`DiskCache`), without a store or a mount: an entry saved
is loaded whole and in ranges, by this cache and by another opened on the same directory; a
damaged entry is never served, and is dropped; the least recently used entries make room,
and the directory's files never take more than its size; a changed object's other
generations are dropped. The rest of this room goes through a moto S3 server and mounts."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from zarrfs.store.disk_cache import DiskCache
from zarrfs.store.disk_cache.cache import SMALLEST, DiskCacheError, entry_name

pytestmark = pytest.mark.fast

STORE = "s3://bucket/array.zarr"
MIB = 1 << 20


def payload(seed: int, length: int = MIB) -> bytes:
    return bytes((seed + i) % 251 for i in range(256)) * (length // 256)


def saved(cache: DiskCache, path: str, generation: str = "g1", seed: int = 0) -> tuple[str, bytes]:
    """The name of `path`'s whole object at `generation`, saved with its bytes."""
    name, data = entry_name(STORE, path, 0, -1, generation), payload(seed)
    cache.save(name, STORE, path, generation, data)
    return name, data


def loaded(cache: DiskCache, name: str, start: int = 0, length: int = -1) -> bytes | None:
    found = cache.load(name, start, length)
    return None if found is None else bytes(found)


def on_disk(directory: Path) -> int:
    """What the directory's files take on disk, the index's own included."""
    return sum(path.stat().st_blocks * 512 for path in directory.rglob("*") if path.is_file())


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    return tmp_path / "cache"


@pytest.fixture
def cache(directory: Path) -> Iterator[DiskCache]:
    opened = DiskCache(str(directory), SMALLEST)
    yield opened
    opened.close()


def test_an_entry_is_loaded_whole_and_in_ranges_by_every_cache_of_the_directory(
        cache: DiskCache, directory: Path) -> None:
    name, data = saved(cache, "c/0/0")
    assert loaded(cache, name) == data
    assert loaded(cache, name, 1000, 50) == data[1000:1050]
    assert cache.length(name) == len(data)
    assert loaded(cache, entry_name(STORE, "c/0/0", 0, -1, "g2")) is None  # (another generation)
    other = DiskCache(str(directory), SMALLEST)  # (another daemon naming the same directory)
    try:
        assert loaded(other, name) == data
        assert other.generations(STORE, "c/0/0") == ["g1"]
    finally:
        other.close()


def test_a_damaged_entry_is_not_served_and_is_dropped(cache: DiskCache, directory: Path,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    name, data = saved(cache, "c/0/0")
    entry = directory / "objects" / name
    with open(entry, "r+b") as f:
        f.seek(-1000, os.SEEK_END)
        flipped = f.read(1)[0] ^ 0x10
        f.seek(-1000, os.SEEK_END)
        f.write(bytes([flipped]))
    with caplog.at_level(logging.WARNING, logger="zarrfs.store.disk_cache.cache"):
        assert loaded(cache, name) is None
    assert "failed its checksum" in caplog.text
    assert not entry.exists() and cache.length(name) is None
    cache.save(name, STORE, "c/0/0", "g1", data)  # (fetched again, it is kept again)
    assert loaded(cache, name) == data


def test_the_least_recently_used_make_room_within_the_size(cache: DiskCache, directory: Path) -> None:
    names = [saved(cache, f"c/0/{i}", seed=i)[0] for i in range(6)]
    for name in [*names[1:], names[0]]:  # (all kept; the first used again last)
        assert loaded(cache, name) == payload(names.index(name))
    cache.write_touches()
    newest, data = saved(cache, "c/0/6", seed=6)
    assert loaded(cache, newest) == data
    assert loaded(cache, names[0]) is not None
    assert loaded(cache, names[1]) is None  # (the least recently used went first)
    for i in range(7, 24):
        saved(cache, f"c/0/{i}", seed=i)
        assert 5 * MIB < on_disk(directory) <= SMALLEST
    assert 5 * MIB < cache.cached_bytes() <= SMALLEST
    assert loaded(cache, entry_name(STORE, "c/0/23", 0, -1, "g1")) == payload(23)


def test_a_changed_objects_other_generations_are_dropped(cache: DiskCache) -> None:
    old, _ = saved(cache, "c/0/0", "g1")
    new, data = saved(cache, "c/0/0", "g2", seed=1)
    kept, _ = saved(cache, "c/0/1", "g1")
    cache.drop(STORE, "c/0/0", keep="g2")
    assert loaded(cache, old) is None
    assert loaded(cache, new) == data
    assert loaded(cache, kept) is not None
    assert cache.generations(STORE, "c/0/0") == ["g2"]


def test_a_size_too_small_for_any_entry_is_refused_in_one_line(directory: Path) -> None:
    with pytest.raises(DiskCacheError) as refused:
        DiskCache(str(directory), SMALLEST - 1)
    assert "disk_cache_size" in str(refused.value) and "\n" not in str(refused.value)
