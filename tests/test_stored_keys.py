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
from scale_arrays import write_twin
from test_store_stats import Calls

from zarrfs.array import ZarrArray
from zarrfs.array_metadata import open_array
from zarrfs.store import Store

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
