"""Making room for writes (zarrfs.array.writes.writeback.make_room), without FUSE: once dirty data
passes its limit, a write stores the least recently written chunks, down to a margin under
the limit, and not every dirty chunk (a random writer of `data` dirties a row of chunks with
each write: storing them all each time rewrote every chunk the cache held)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from zarrfs.array import ZarrArray
from zarrfs.array_metadata import create_array
from zarrfs.formats.v3 import metadata_from_json
from zarrfs.grid import Box
from zarrfs.store import Store

pytestmark = pytest.mark.fast

SHAPE = (64, 96)  # 4 rows of 3 chunks
CHUNKS = (16, 32)


def _array(path: Path, cache_bytes: int | None = None) -> ZarrArray:
    doc = {
        "zarr_format": 3, "node_type": "array", "shape": list(SHAPE), "data_type": "uint16",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(CHUNKS)}},
        "chunk_key_encoding": {"name": "default"}, "fill_value": 0,
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                   {"name": "zstd", "configuration": {"level": 1}}],
    }
    return create_array(Store.open(str(path)), metadata_from_json(doc), threads=2,
                        cache_bytes=cache_bytes)


def _write_row(array: ZarrArray, row: int) -> None:
    """One row of the array: part of each chunk of a row of chunks, as a write of `data` is."""
    array.write(Box((row, 0), (row + 1, SHAPE[1])), np.full((1, SHAPE[1]), row + 1, dtype="<u2"))


def _stored(path: Path, chunk_row: int) -> list[bool]:
    return [(path / "c" / str(chunk_row) / str(column)).exists() for column in range(3)]


def test_making_room_stores_the_oldest_chunks_not_all(tmp_path: Path) -> None:
    probe = _array(tmp_path / "probe")
    _write_row(probe, 0)
    row_cost = probe.dirty_bytes  # three chunks partly written
    probe.close()
    # Room for three rows of dirty chunks; making room stores down to two and a half.
    array = _array(tmp_path / "a", cache_bytes=4 * row_cost)
    for chunk_row in range(4):  # the fourth passes the limit: the next write makes room
        _write_row(array, chunk_row * CHUNKS[0])
    assert array.dirty_bytes == 4 * row_cost
    _write_row(array, 1)  # (in the first row of chunks, written first: stored already)
    assert _stored(tmp_path / "a", 0) == [True] * 3
    assert _stored(tmp_path / "a", 3) == [False] * 3
    assert array.dirty_bytes > 2 * row_cost  # the newest rows of chunks stay dirty
    array.flush()
    assert all(all(_stored(tmp_path / "a", r)) for r in range(4))
    values = array.read(Box((0, 0), SHAPE))
    for row in (0, 1, 16, 32, 48):
        assert (values[row] == row + 1).all()
    assert (values[2] == 0).all()
    array.close()
