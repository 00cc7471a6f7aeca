"""Finding an array's stored chunks (what data.tif's tiles are made from) costs memory and
time in proportion to what is stored, never to the chunk grid (issue 37: a grid of 10^9 cells
took the daemon past all the machine's memory). On a large grid the keys come from a listing
of the array; they must be exactly those a key per cell finds."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest
import zstandard
from scale_arrays import write_twin

from zarrfs.array import ZarrArray
from zarrfs.array.core import KEYS_FROM_GRID_UP_TO
from zarrfs.array_metadata import open_array
from zarrfs.store import Store

# 2,048 x 2,048 chunks (4 x KEYS_FROM_GRID_UP_TO cells), three stored: a key per cell would
# hold some 4 million keys (hundreds of MB); the three stored take a few KB.
GRID, CHUNK = (2048, 2048), (16, 16)
STORED = [(0, 0), (1000, 7), (2047, 2047)]
FEW_MIB = 16 << 20


@pytest.fixture(scope="module")
def sparse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_twin(tmp_path_factory.mktemp("keys") / "sparse.zarr", GRID, CHUNK, stored=STORED)


def opened(path: Path) -> ZarrArray:
    return open_array(Store.open(str(path)), threads=1)


def peak_bytes_of(work: object) -> tuple[object, int]:
    tracemalloc.start()
    try:
        result = work() if callable(work) else None
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_locating_a_sparse_grid_holds_what_is_stored(sparse: Path) -> None:
    assert GRID[0] * GRID[1] > KEYS_FROM_GRID_UP_TO  # (the keys come from a listing)
    array = opened(sparse)
    try:
        located, peak = peak_bytes_of(array.locate_stored)
        assert isinstance(located, dict)
        assert sorted(located) == STORED
        for (i, j), where in located.items():
            assert where.key == f"c/{i}/{j}"
            assert where.nbytes == (sparse / "c" / str(i) / str(j)).stat().st_size
        assert peak < FEW_MIB, f"locating 3 stored chunks took {peak >> 20} MiB"
    finally:
        array.close()


def test_a_listing_of_a_sparse_grid_sees_another_writers_new_chunk(tmp_path: Path) -> None:
    copy = write_twin(tmp_path / "copy.zarr", GRID, CHUNK, stored=STORED)
    array = opened(copy)
    try:
        before, peak = peak_bytes_of(array.list_stored)
        assert array.list_stored().digest == getattr(before, "digest", None) is not None
        (copy / "c" / "5").mkdir()
        (copy / "c" / "5" / "6").write_bytes(zstandard.ZstdCompressor().compress(bytes(256)))
        assert array.list_stored().digest != getattr(before, "digest", None)
        assert (5, 6) in array.locate_stored()
        assert peak < FEW_MIB, f"listing 3 stored chunks took {peak >> 20} MiB"
    finally:
        array.close()


def test_keys_outside_the_grid_or_not_chunks_are_left_out(tmp_path: Path) -> None:
    path = write_twin(tmp_path / "odd.zarr", GRID, CHUNK, stored=STORED)
    (path / "c" / "2048").mkdir()
    (path / "c" / "2048" / "0").write_bytes(b"past the grid")
    (path / "c" / "0" / "01").write_bytes(b"not a key")
    (path / "notes.txt").write_bytes(b"not a chunk")
    array = opened(path)
    try:
        assert sorted(array.locate_stored()) == STORED
    finally:
        array.close()
