"""A write's values split by chunk (zarrfs.array.cache.pieces) and writes across many chunks:
each piece's values are the box's elements in that chunk, reordered into runs only where the
chunk grid splits the box into equal parts; a write of any box (edge chunks, partial chunks,
whole rows of chunks, a store in between) reads back as numpy's array does, plain and
sharded."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers.local_arrays import create_uint16_zstd
from zarrfs.array.cache.pieces import by_piece, copy_into
from zarrfs.array_metadata import open_array
from zarrfs.grid import Box, cells_of
from zarrfs.store import Store

pytestmark = pytest.mark.fast

SHAPE = (70, 100)  # edge chunks along both axes
CHUNKS = (16, 20)  # a plain array's chunks, a sharded array's shards
INNER = (8, 10)
WAIT = 30.0


@pytest.mark.parametrize(("start", "stop", "cell", "in_runs"), [
    ((0, 0), (16, 100), (16, 20), True),  # a row of chunks, whole: equal parts
    ((16, 0), (24, 80), (16, 20), True),  # part of a row of chunks: equal parts
    ((3, 5), (40, 47), (16, 20), False),  # unaligned: unequal parts
    ((0, 0), (8, 9), (16, 20), False),  # inside one chunk
    ((0, 0, 0), (4, 6, 8), (2, 3, 4), True),  # rank 3, equal parts
    ((1, 0, 0), (4, 6, 8), (2, 3, 4), False),  # rank 3, unequal along the first axis
])
def test_each_piece_gets_the_box_elements_in_its_chunk(start: tuple[int, ...], stop: tuple[int, ...],
                                                       cell: tuple[int, ...], in_runs: bool) -> None:
    box = Box(start, stop)
    values = np.arange(box.size, dtype="<u2").reshape(box.shape)
    pieces = list(cells_of(box, cell))
    parts = by_piece(values, pieces)
    assert len(parts) == len(pieces)
    for piece, part in zip(pieces, parts, strict=True):
        assert np.array_equal(part, values[piece.in_box]), piece
    reordered = [part.flags.c_contiguous and not np.shares_memory(part, values) for part in parts]
    assert all(reordered) if in_runs else not any(reordered)


def test_copy_into_copies_contiguous_and_strided_alike() -> None:
    source = np.arange(60, dtype=">i4").reshape(6, 10)
    target = np.zeros((6, 10), dtype=">i4")
    copy_into(target, (slice(2, 4), slice(0, 10)), source[:2])  # contiguous both: one memcpy
    copy_into(target, (slice(0, 6), slice(0, 3)), source[:, 5:8])  # strided: numpy
    expected = np.zeros((6, 10), dtype=">i4")
    expected[2:4] = source[:2]
    expected[:, :3] = source[:, 5:8]
    assert np.array_equal(target, expected)
    converted = np.zeros((2, 10), dtype="<i4")
    copy_into(converted, (slice(0, 2), slice(0, 10)), source[:2])  # another byte order: converted
    assert np.array_equal(converted, source[:2])
    scalar = np.zeros((), dtype="<u2")
    copy_into(scalar, (), np.full((), 5, dtype="<u2"))  # rank 0
    assert scalar[()] == 5


def _create(path: Path, sharded: bool) -> None:
    create_uint16_zstd(path, SHAPE, CHUNKS, inner=INNER if sharded else None, fill_value=7).close()


@pytest.mark.parametrize("sharded", [False, True], ids=["plain", "sharded"])
def test_writes_across_many_chunks_read_back_as_numpy(tmp_path: Path, sharded: bool) -> None:
    _create(tmp_path, sharded)
    rng = np.random.default_rng(5)
    expected = np.full(SHAPE, 7, dtype="<u2")
    boxes = [Box((0, 0), (16, 100)), Box((16, 0), (24, 100)), Box((3, 5), (69, 97)), Box((64, 0), (70, 100)),
             *[Box((a, b), (a + h, b + w)) for a, b, h, w in zip(
                 rng.integers(0, 60, 12), rng.integers(0, 90, 12), rng.integers(1, 11, 12),
                 rng.integers(1, 11, 12), strict=True)]]
    array = open_array(Store.open(str(tmp_path)), threads=2)
    try:
        for i, box in enumerate(boxes):
            values = rng.integers(0, 60000, box.shape, dtype="<u2")
            array.write(box, values)
            expected[box.slices()] = values
            if i == 3:
                array.flush()  # (later writes go into chunks stored, partly read back)
        assert np.array_equal(array.read(Box((0, 0), SHAPE)), expected)
        array.flush()
    finally:
        array.close()
    reopened = open_array(Store.open(str(tmp_path)), threads=2)
    try:
        assert np.array_equal(reopened.read(Box((0, 0), SHAPE)), expected)
    finally:
        reopened.close()


def test_a_write_waits_for_a_load_in_flight_of_one_of_its_chunks(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The pieces before the chunk being loaded are written, the rest once the load is in
    the cache: the stored elements the write leaves alone are there, under the write's."""
    _create(tmp_path, sharded=False)
    stored = np.arange(np.prod(SHAPE), dtype="<u2").reshape(SHAPE)
    array = open_array(Store.open(str(tmp_path)), threads=2)
    try:
        array.write(Box((0, 0), SHAPE), stored)
        array.flush()
        array.array_cache.drop_all()  # (all stored, none cached)
        fetched, release = threading.Event(), threading.Event()
        install = array.array_cache.install

        def held_install(*args: Any) -> Any:
            fetched.set()
            assert release.wait(WAIT)
            return install(*args)

        monkeypatch.setattr(array.array_cache, "install", held_install)
        reader = threading.Thread(target=array.read, args=(Box((16, 20), (17, 21)),))  # chunk (1, 1)
        reader.start()
        assert fetched.wait(WAIT), "the read never fetched its chunk"
        box = Box((10, 5), (30, 60))  # chunks (0..1, 0..2), partly
        values = np.full(box.shape, 9, dtype="<u2")
        writer = threading.Thread(target=array.write, args=(box, values))
        writer.start()
        writer.join(0.5)
        assert writer.is_alive(), "the write did not wait for the load of a chunk it writes"
        release.set()
        writer.join(WAIT)
        reader.join(WAIT)
        assert not writer.is_alive() and not reader.is_alive()
        expected = stored.copy()
        expected[box.slices()] = values
        assert np.array_equal(array.read(Box((0, 0), SHAPE)), expected)
    finally:
        release.set()
        array.close()
