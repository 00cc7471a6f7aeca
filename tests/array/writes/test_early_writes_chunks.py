"""Storing chunks ahead of a flush (zarrfs.array.writes.writeback.store_early), without FUSE: a chunk
or shard this mount wrote whole is encoded and stored while the writer goes on, nothing is
read to do it, a failure leaves the data for the flush, and the flush still makes it durable;
an array that encodes fast is not encoded ahead."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers.early_writes import (
    BYTES,
    CHUNKS,
    INNER,
    SHAPE,
    ZSTD,
    local_array,
    seeded,
    settled,
    write_seeded,
)
from zarrfs.array.stored import ShardedChunkIO
from zarrfs.array_metadata import create_array, open_array
from zarrfs.formats.v3 import metadata_from_json
from zarrfs.grid import Box
from zarrfs.store import Store

pytestmark = pytest.mark.fast


def _stored(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*") if p.is_file() and p.name != "zarr.json"}


@pytest.mark.parametrize("sharded", [False, True], ids=["plain", "sharded"])
def test_chunks_written_whole_are_stored_without_a_flush(tmp_path: Path, sharded: bool) -> None:
    array = local_array(tmp_path, sharded)
    try:
        first_row = Box((0, 0), (CHUNKS[0], SHAPE[1]))  # every chunk (shard) of row 0, whole
        array.write(first_row, seeded(first_row))
        half = Box((CHUNKS[0], 0), (CHUNKS[0] + 4, SHAPE[1]))  # part of row 1
        array.write(half, seeded(half))
        settled(array)
        assert _stored(tmp_path) == {f"c/0/{j}" for j in range(SHAPE[1] // CHUNKS[1])}
        assert array.stats.bytes_fetched == 0, "storing a whole chunk read the stored one"
        assert array.early.unsynced == {(0, j) for j in range(SHAPE[1] // CHUNKS[1])}
        array.flush()
        assert not array.early.unsynced, "the flush did not sync what was stored early"
    finally:
        array.close()
    reopened = open_array(Store.open(str(tmp_path)))
    try:
        got = reopened.read(Box((0, 0), (CHUNKS[0] + 4, SHAPE[1])))
        assert np.array_equal(got[: CHUNKS[0]], seeded(first_row))
        assert np.array_equal(got[CHUNKS[0]:], seeded(half))
    finally:
        reopened.close()


def test_a_shard_is_stored_early_only_once_all_of_it_is_written(tmp_path: Path) -> None:
    array = local_array(tmp_path, sharded=True)
    try:
        left = Box((0, 0), (CHUNKS[0], INNER[1]))  # one of the two inner chunks of shard (0, 0)
        array.write(left, seeded(left))
        settled(array)
        assert _stored(tmp_path) == set()
        right = Box((0, INNER[1]), (CHUNKS[0], CHUNKS[1]))
        array.write(right, seeded(right, 7))
        settled(array)
        assert _stored(tmp_path) == {"c/0/0"}
        array.flush()
    finally:
        array.close()


def test_a_failed_early_write_is_kept_for_the_flush(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    array = local_array(tmp_path)
    put = array.store.put
    failures = []

    def failing_put(key: str, data: Any, **kwargs: Any) -> Any:
        if not failures:
            failures.append(key)
            raise OSError(28, "No space left on device")
        return put(key, data, **kwargs)

    monkeypatch.setattr(array.store, "put", failing_put)
    try:
        box = Box((0, 0), CHUNKS)
        with caplog.at_level(logging.WARNING):
            array.write(box, seeded(box))
            settled(array)
        assert failures == ["c/0/0"] and _stored(tmp_path) == set()
        assert "ahead of a flush failed" in caplog.text and "No space left" in caplog.text
        assert array.dirty_bytes > 0, "the data of a failed early write was dropped"
        array.flush()
        assert _stored(tmp_path) == {"c/0/0"}
    finally:
        array.close()
    reopened = open_array(Store.open(str(tmp_path)))
    try:
        assert np.array_equal(reopened.read(Box((0, 0), CHUNKS)), seeded(Box((0, 0), CHUNKS)))
    finally:
        reopened.close()


def test_an_edge_chunk_is_whole_once_its_part_inside_the_array_is_written(tmp_path: Path) -> None:
    doc = {
        "zarr_format": 3, "node_type": "array", "shape": [20, 40], "data_type": "uint16",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [16, 32]}},
        "chunk_key_encoding": {"name": "default"}, "fill_value": 5, "codecs": [BYTES, ZSTD],
    }
    array = create_array(Store.open(str(tmp_path)), metadata_from_json(doc), threads=2)
    try:
        corner = Box((16, 32), (20, 40))  # all of chunk (1, 1) that lies inside the array
        array.write(corner, seeded(corner))
        settled(array)
        assert _stored(tmp_path) == {"c/1/1"}
        assert array.stats.bytes_fetched == 0
        array.flush()
    finally:
        array.close()
    reopened = open_array(Store.open(str(tmp_path)))
    try:
        assert np.array_equal(reopened.read(corner), seeded(corner))
        stored = next(reopened.fetch([(1, 1)])).data
        assert stored is not None and (stored[4:, :] == 5).all() and (stored[:, 8:] == 5).all()
    finally:
        reopened.close()


def test_inner_chunks_written_whole_are_encoded_before_their_shard_is_whole(tmp_path: Path) -> None:
    """Each inner chunk is encoded once: ahead, as soon as it is whole, and that encoding is
    what the shard's write-back stores. One written again meanwhile is encoded again."""
    array = local_array(tmp_path, sharded=True)
    try:
        encoded = lambda: array.shared.counters.snapshot()["chunks_encoded"]  # noqa: E731
        first, second = Box((0, 0), INNER), Box((0, INNER[1]), CHUNKS)  # the shard's two halves
        array.write(first, seeded(first, seed=1))
        ((_, job, _),) = array.early.encoded.values()
        job.result()
        assert encoded() == 1 and not _stored(tmp_path)  # encoded, not stored: half a shard
        write_seeded(array, second, 2)
        assert encoded() == 2 and _stored(tmp_path) == {"c/0/0"}
        assert not array.early.encoded and array.early.encoded_bytes == 0
        with array.cache.lock:  # the encodings held against the cache were let go
            assert array.cache.total_bytes == sum(e.nbytes for e in array.cache.entries.values())

        other = Box((CHUNKS[0], 0), (CHUNKS[0] + INNER[0], INNER[1]))  # half of the next shard
        array.write(other, seeded(other, seed=3))
        array.early.encoded[(1, 0)][1].result()
        array.write(other, seeded(other, seed=4))  # after its encoding: that one is stale
        array.flush()
        reopened = open_array(Store.open(str(tmp_path)), threads=2)
        try:
            assert np.array_equal(reopened.read(other), seeded(other, seed=4))
            assert np.array_equal(reopened.read(Box((0, 0), CHUNKS)),
                                  np.concatenate([seeded(first, seed=1), seeded(second, seed=2)], axis=1))
        finally:
            reopened.close()
    finally:
        array.close()


def test_an_array_that_encodes_fast_is_not_encoded_ahead(tmp_path: Path) -> None:
    """Fast codecs keep up at the shard's write-back; encoding ahead only competes with the
    writer."""
    array = local_array(tmp_path, sharded=True)
    try:
        io = array.io
        assert isinstance(io, ShardedChunkIO) and io.encodes_slowly  # nothing measured yet
        io.note_encoding(8 << 30, 1.0)  # as if 8 GiB had been encoded in a second
        assert not io.encodes_slowly
        half = Box((0, 0), INNER)
        array.write(half, seeded(half))
        assert not array.early.encoded
        array.flush()
        assert np.array_equal(array.read(half), seeded(half))
    finally:
        array.close()
