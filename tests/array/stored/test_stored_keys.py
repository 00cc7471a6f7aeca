"""Locating stored chunks (what data.tif's tiles are read from) costs a look at the chunks
asked for, never at the grid or the array (issue 37: a grid of 10^9 cells took the daemon
past all the machine's memory, a listing of the array cost a stat of data.tif 0.6 s at 10^5
chunks). `ZarrArray.locate_stored(units)` is what `views.tile_locations` asks per block."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest
import zstandard

from tests.helpers.scale_arrays import write_twin
from tests.helpers.store_observers import Calls
from zarrfs.array import ZarrArray
from zarrfs.array_metadata import open_array
from zarrfs.store import Store

pytestmark = pytest.mark.fast

# 2,048 x 2,048 chunks, three stored: the grid's 4 million cells are never all made.
GRID, CHUNK = (2048, 2048), (16, 16)
STORED = [(0, 0), (1000, 7), (2047, 2047)]
FEW_MIB = 16 << 20


@pytest.fixture(scope="module")
def sparse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_twin(tmp_path_factory.mktemp("keys") / "sparse.zarr", GRID, CHUNK, stored=STORED)


def opened(path: Path, calls: Calls | None = None) -> ZarrArray:
    return open_array(Store.open(str(path), observer=calls), threads=1)


def test_locating_a_row_finds_what_is_stored_there(sparse: Path) -> None:
    calls = Calls()
    array = opened(sparse, calls)
    try:
        row = [(1000, j) for j in range(512)]
        calls.kinds.clear()  # (opening read the metadata)
        tracemalloc.start()
        try:
            located = array.locate_stored(row)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert sorted(located) == [(1000, 7)]
        assert located[(1000, 7)].key == "c/1000/7"
        assert located[(1000, 7)].nbytes == (sparse / "c" / "1000" / "7").stat().st_size
        assert calls.kinds == ["stat"] * 512  # (one each: never a scan of the array)
        assert peak < FEW_MIB, f"locating a row took {peak >> 20} MiB"
    finally:
        array.close()


def test_a_second_look_sees_another_writers_new_chunk(tmp_path: Path) -> None:
    copy = write_twin(tmp_path / "copy.zarr", (64, 64), CHUNK, stored=[(5, 5)])
    array = opened(copy)
    try:
        row = [(5, j) for j in range(64)]
        assert sorted(array.locate_stored(row)) == [(5, 5)]
        (copy / "c" / "5" / "6").write_bytes(zstandard.ZstdCompressor().compress(bytes(256)))
        assert sorted(array.locate_stored(row)) == [(5, 5), (5, 6)]
    finally:
        array.close()


def test_flat_keys_and_shards_are_located_by_the_chunks_asked_for(tmp_path: Path) -> None:
    """"." keys (every chunk in one directory) cost their own keys; sharded arrays, the index
    of each shard that holds a chunk asked for."""
    path = write_twin(tmp_path / "flat.zarr", (64, 64), CHUNK, stored=[(3, 4), (9, 9)])
    metadata = json.loads((path / "zarr.json").read_text())
    metadata["chunk_key_encoding"]["configuration"]["separator"] = "."
    (path / "zarr.json").write_text(json.dumps(metadata))
    for i, j in [(3, 4), (9, 9)]:
        (path / "c" / str(i) / str(j)).rename(path / f"c.{i}.{j}")
    calls = Calls()
    array = opened(path, calls)
    try:
        calls.kinds.clear()
        located = array.locate_stored([(3, j) for j in range(64)])
        assert {unit: where.key for unit, where in located.items()} == {(3, 4): "c.3.4"}
        assert calls.kinds == ["stat"] * 64
    finally:
        array.close()


def test_inner_chunks_of_shards_are_located_by_their_shards_index(tmp_path: Path) -> None:
    import numpy as np
    import zarr

    written = zarr.create_array(tmp_path / "s.zarr", shape=(128, 128), shards=(64, 64), chunks=(16, 16),
                                dtype="u1", fill_value=0, compressors=[zarr.codecs.ZstdCodec(level=1)])
    written[16:32, 64:80] = 7  # inner chunk (1, 4) of shard (0, 1)
    array = opened(tmp_path / "s.zarr")
    try:
        located = array.locate_stored([(1, j) for j in range(8)])
        assert list(located) == [(1, 4)] and located[(1, 4)].key == "c/0/1"
        encoded = array.read_stored(located[(1, 4)])
        decoded = zstandard.ZstdDecompressor().decompress(bytes(encoded), max_output_size=256)
        assert decoded == np.full((16, 16), 7, "u1").tobytes()
    finally:
        array.close()


def test_a_chunk_read_now_is_read_where_its_shard_says_or_left_to_a_wait(tmp_path: Path) -> None:
    """`read_chunk_now` (data.tif's tiles on a local store): an inner chunk's bytes are read
    where its shard's index says (the index read once, from the page cache, then cached); an
    inner chunk not stored is -1; a shard not stored, one rewritten since its index was read,
    one with a corrupt index, and a chunk too long for the buffer are left to a read that
    waits (None), which sees the rewrite or names the corruption."""
    import zarr

    from zarrfs.errors import ChunkError

    path = tmp_path / "s.zarr"
    written = zarr.create_array(path, shape=(128, 128), shards=(64, 64), chunks=(16, 16), dtype="u1",
                                fill_value=0, compressors=[zarr.codecs.ZstdCodec(level=1)])
    written[16:32, 64:80] = 7  # inner chunk (1, 4) of shard (0, 1)
    written[0:16, 0:16] = 9  # inner chunk (0, 0) of shard (0, 0)
    shard = path / "c" / "0" / "1"
    located = opened(path).locate_stored([(1, 4)])[(1, 4)]
    stored = shard.read_bytes()[located.offset : located.offset + located.nbytes]
    array = opened(path)
    into = memoryview(bytearray(4096))
    try:
        assert array.read_chunk_now((1, 4), into) == len(stored) and into[: len(stored)] == stored
        assert array.read_chunk_now((1, 5), into) == -1  # (empty in a stored shard)
        assert array.read_chunk_now((4, 4), into) is None  # (shard (1, 1) is not stored)
        assert array.read_chunk_now((1, 4), into[: len(stored) - 1]) is None
        written[16:32, 64:80] = 8  # (another writer: a new shard, its chunk elsewhere or other)
        assert array.read_chunk_now((1, 4), into) is None  # (its index is of the old shard)
        assert bytes(array.read_stored_unit((1, 4)) or b"") != stored
        index_end = path / "c" / "0" / "0"
        damaged = bytearray(index_end.read_bytes())
        damaged[-6] ^= 0xFF  # (an entry of the index, under its CRC-32C)
        index_end.write_bytes(bytes(damaged))
        assert array.read_chunk_now((0, 0), into) is None
        with pytest.raises(ChunkError, match="crc32c"):
            array.read_stored_unit((0, 0))
    finally:
        array.close()
