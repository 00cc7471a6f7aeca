"""Reading back what this mount wrote and has not stored, without FUSE: a read that wants
only elements written into a chunk the cache holds partly (nothing of it read) is answered
from what was written, with no load of the stored chunk, as it must be while the store does
not answer (a partition: tests/reliability/test_partition_reads.py). Here the stored chunk or shard
is damaged instead, so any load of it fails: the read of written elements succeeds, a read
that also wants an unwritten element still reports the damage."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers.local_arrays import create_uint16_zstd
from zarrfs.array import ZarrArray
from zarrfs.array_metadata import open_array
from zarrfs.errors import ChunkError
from zarrfs.grid import Box
from zarrfs.store import Store

pytestmark = pytest.mark.fast

SHAPE = (64, 96)
CHUNKS = (16, 32)  # a plain array's chunks, a sharded array's shards
INNER = (8, 16)


def _create(path: Path, sharded: bool) -> None:
    array = create_uint16_zstd(path, SHAPE, CHUNKS, inner=INNER if sharded else None)
    try:
        array.write(Box((0, 0), SHAPE), np.arange(np.prod(SHAPE), dtype="<u2").reshape(SHAPE))
        array.flush()
    finally:
        array.close()
    (path / "c" / "0" / "0").write_bytes(b"not a chunk: " * 64)  # (damaged in place)


@pytest.fixture(params=[False, True], ids=["plain", "sharded"])
def damaged(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    _create(tmp_path, request.param)
    array = open_array(Store.open(str(tmp_path)), threads=2)
    yield array
    array.close()


def _write(array: ZarrArray, box: Box, value: int) -> np.ndarray:
    values = np.full(box.shape, value, dtype="<u2")
    array.write(box, values)
    return values


def test_written_elements_read_back_without_the_stored_chunk(damaged: ZarrArray) -> None:
    # Part of a row of the first (damaged) chunk: a mask per element.
    box = Box((3, 5), (4, 14))
    written = _write(damaged, box, 7)
    assert np.array_equal(damaged.read(box), written)
    assert np.array_equal(damaged.read(Box((3, 6), (4, 9))), written[:, 1:4])
    with pytest.raises(ChunkError) as caught:
        damaged.read(Box((3, 4), (4, 14)))  # (element [3, 4] was not written)
    assert caught.value.key == "c/0/0"


def test_whole_rows_written_read_back_without_the_stored_chunk(damaged: ZarrArray) -> None:
    # Whole rows of the array: whole rows of each chunk they cross (a mask per row).
    box = Box((4, 0), (6, SHAPE[1]))
    written = _write(damaged, box, 9)
    assert np.array_equal(damaged.read(box), written)
    with pytest.raises(ChunkError):
        damaged.read(Box((4, 0), (7, 8)))  # (row 7 of the damaged chunk was not written)


def test_a_write_back_still_needs_the_stored_chunk(damaged: ZarrArray) -> None:
    _write(damaged, Box((3, 5), (4, 14)), 7)
    with pytest.raises(ChunkError):
        damaged.flush()  # (the unwritten elements must come from the store)
    assert damaged.dirty_bytes > 0
