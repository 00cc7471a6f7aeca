"""data.tif opened again (close-to-open) through real mounts of a local store and of S3 (a
moto server): the open costs no request (the layout comes from the array's shape and codecs);
what another writer (zarr-python) rewrote is shown exactly; a chunk or a shard it deleted
shown as the fill tile. (Zstd tiles as stored: mounted with `-o filters=plugins`; a default
mount serves them decoded, tests/views/tiff/test_tiff_readers.py.) And `Store.stats` over S3: a listing
of each row of chunks asked for, agreeing with `Store.stat` key by key."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fsspec
import numpy as np
import pytest
import tifffile
import zarr
from zarr.codecs import ZstdCodec

from tests.helpers.mounting import Mount, mount_stats, mounted
from tests.helpers.s3_server import S3Server
from tests.helpers.store_observers import Calls
from zarrfs.store import Store

SHAPE = (256, 512)
SHARDS, CHUNKS = (64, 128), (32, 64)  # 4 x 4 shards of 2 x 2 inner chunks
TILES_PER_ROW = SHAPE[1] // CHUNKS[1]


@dataclass
class Where:
    """An array's place, for zarr-python (the other writer) and for the mount."""

    url: str
    mount_options: list[str]
    storage_options: dict[str, Any] = field(default_factory=dict)

    def stored(self, key: str) -> bool:
        fs, root = fsspec.core.url_to_fs(self.url, **self.storage_options)
        return bool(fs.exists(f"{root}/{key}"))


@pytest.fixture(params=["local", "s3"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Where:
    if request.param == "local":
        return Where(str(tmp_path / "image.zarr"), ["ro", "filters=plugins"])
    server: S3Server = request.getfixturevalue("s3_server")
    options = {"endpoint_url": server.endpoint_url, "key": "testing", "secret": "testing"}
    mount_options = [f"endpoint_url={server.endpoint_url}", "ro", "filters=plugins"]
    return Where(f"s3://{server.bucket}/image", mount_options, options)


@pytest.fixture
def mount(where: Where, tmp_path: Path) -> Iterator[Callable[[], Mount]]:
    """mount() -> the array at `where` mounted (call it once the array is written);
    unmounted at the end of the test."""
    with ExitStack() as stack:
        yield lambda: stack.enter_context(mounted(where.url, tmp_path / "mnt", where.mount_options))


def written(where: Where, sharded: bool) -> tuple[np.ndarray[Any, Any], zarr.Array]:
    values = np.random.default_rng(5).integers(1, 4000, SHAPE).astype("<u2")
    values[: CHUNKS[0], : CHUNKS[1]] = 0  # tile 0: fill, not stored
    chunking = {"shards": SHARDS, "chunks": CHUNKS} if sharded else {"chunks": CHUNKS}
    array = zarr.create_array(store=where.url, shape=SHAPE, dtype="<u2", fill_value=0,
                              compressors=ZstdCodec(level=1), storage_options=where.storage_options or None,
                              **chunking)
    array[...] = values
    return values, array


def fetched(mount: Mount) -> float:
    return float(mount_stats(mount)["bytes_fetched"])


def tile_bytes(tif: Path, offsets: list[int], counts: list[int], tile: int) -> bytes:
    with open(tif, "rb", buffering=0) as f:
        return os.pread(f.fileno(), counts[tile], offsets[tile])


def reopened(tif: Path) -> tuple[list[int], list[int]]:
    """Open data.tif again (what a reader's open does: the mount rechecks the store); its
    tiles' offsets and byte counts."""
    with tifffile.TiffFile(tif) as tiff:  # (it reads the header, no tile)
        page = tiff.pages[0]
        return list(page.dataoffsets), list(page.databytecounts)  # type: ignore[union-attr]


def test_a_reopen_of_unchanged_shards_reads_no_index(where: Where, mount: Callable[[], Mount]) -> None:
    values, _ = written(where, sharded=True)
    mounted_array = mount()
    tif = mounted_array.path / "data.tif"
    assert np.array_equal(tifffile.imread(tif), values)
    layout = reopened(tif)
    before = fetched(mounted_array)
    for _ in range(3):
        os.close(os.open(tif, os.O_RDONLY))
        assert reopened(tif) == layout
    assert fetched(mounted_array) == before


def test_another_writers_shards_at_the_next_open(where: Where, mount: Callable[[], Mount]) -> None:
    """One shard rewritten (its index read again, exactly one), one deleted (its tiles are
    the fill tile), the others as they were (their indexes not read)."""
    values, other = written(where, sharded=True)
    mounted_array = mount()
    tif = mounted_array.path / "data.tif"
    assert np.array_equal(tifffile.imread(tif), values)
    values[64:128, 0:128] = np.random.default_rng(6).integers(1, 60000, (64, 128))  # shard (1, 0)
    other[64:128, 0:128] = values[64:128, 0:128]
    values[128:192, 128:256] = 0  # shard (2, 1)
    other[128:192, 128:256] = 0
    assert not where.stored("c/2/1") and where.stored("c/1/0")
    before = fetched(mounted_array)
    offsets, counts = reopened(tif)  # (the tables: the sizes learned again, from the shard indexes)
    assert fetched(mounted_array) == before + 2 * 2 * 16 + 4  # (the rewritten shard's index alone)
    assert np.array_equal(tifffile.imread(tif), values)
    deleted = [row * TILES_PER_ROW + column for row in (4, 5) for column in (2, 3)]
    fill = tile_bytes(tif, offsets, counts, 0)
    assert all(tile_bytes(tif, offsets, counts, tile) == fill for tile in deleted)
    assert tile_bytes(tif, offsets, counts, 2 * TILES_PER_ROW) != fill  # (rewritten shard (1, 0))


def test_a_chunk_another_writer_deleted_is_the_fill_tile(where: Where, mount: Callable[[], Mount]) -> None:
    values, other = written(where, sharded=False)
    mounted_array = mount()
    tif = mounted_array.path / "data.tif"
    assert np.array_equal(tifffile.imread(tif), values)
    offsets, counts = reopened(tif)
    fill = tile_bytes(tif, offsets, counts, 0)
    assert tile_bytes(tif, offsets, counts, 9) != fill
    values[32:64, 64:128] = 0  # chunk (1, 1), tile 9
    other[32:64, 64:128] = 0
    assert not where.stored("c/1/1")
    offsets, counts = reopened(tif)
    assert tile_bytes(tif, offsets, counts, 9) == fill
    assert np.array_equal(tifffile.imread(tif), values)


def test_s3_stats_list_rows_and_agree_with_stat(s3_server: S3Server) -> None:
    """Rows of chunks whose keys share a prefix that is not a directory ("c/1/..." and
    "c/10/...") and keys not stored: as dense keys (runs of neighbours) a listing of each row,
    never of the array; as the few keys a reader touched a HEAD each; the same answers."""
    options = {"endpoint_url": s3_server.endpoint_url, "key": "testing", "secret": "testing"}
    array = zarr.create_array(store=f"s3://{s3_server.bucket}/group/a", shape=(120, 40), chunks=(10, 10),
                              dtype="u1", fill_value=0, storage_options=options)
    array[...] = 1
    array[20:30] = 0  # row 2: not stored
    zarr.create_array(store=f"s3://{s3_server.bucket}/group/b", shape=(10,), chunks=(5,), dtype="u1",
                      fill_value=0, storage_options=options)[...] = 2
    calls = Calls()
    store = Store(fsspec.filesystem("s3", **s3_server.s3fs_options()), f"{s3_server.bucket}/group",
                  observer=calls)
    keys = [f"a/c/{row}/{column}" for row in (1, 2, 10, 11) for column in range(4)]
    found = store.stats(keys, dense=True)
    assert calls.kinds == ["list"] * 4
    calls.kinds.clear()
    assert store.stats(keys) == found
    assert calls.kinds == ["stat"] * len(keys)
    assert found == {key: store.stat(key) for key in keys}
    assert [key for key, described in found.items() if described is None] == [f"a/c/2/{j}" for j in range(4)]
