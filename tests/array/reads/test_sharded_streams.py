"""Streams of a sharded array (zarrfs.array.reads.streaming over ShardedChunkIO.fetch_run): inner
chunks lying next to each other in a shard are read with one request, holes read as the fill
value, and a shard rewritten between its index and its chunks is read again."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from zarrfs.array import ZarrArray
from zarrfs.array_metadata import create_array, open_array
from zarrfs.formats.v3 import metadata_from_json
from zarrfs.grid import Box
from zarrfs.store import Store

pytestmark = [pytest.mark.fast, pytest.mark.usefixtures("stream_threads")]

SHAPE = (128, 192)
SHARD = (64, 96)
INNER = (32, 48)  # 2 x 2 inner chunks a shard; a row of inner chunks spans 2 shards
VALUES = (np.arange(np.prod(SHAPE), dtype="<u2").reshape(SHAPE) % 1000) + 1  # never the fill value


def _doc() -> dict[str, Any]:
    inner_codecs = [{"name": "bytes", "configuration": {"endian": "little"}},
                    {"name": "zstd", "configuration": {"level": 1}}]
    return {
        "zarr_format": 3, "node_type": "array", "shape": list(SHAPE), "data_type": "uint16",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(SHARD)}},
        "chunk_key_encoding": {"name": "default"}, "fill_value": 0,
        "codecs": [{"name": "sharding_indexed", "configuration": {
            "chunk_shape": list(INNER), "codecs": inner_codecs,
            "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}]}}],
    }


def _open(path: Path) -> ZarrArray:
    return open_array(Store.open(str(path)), threads=2)


@pytest.fixture
def stored(tmp_path: Path) -> Iterator[Path]:
    array = create_array(Store.open(str(tmp_path)), metadata_from_json(_doc()), threads=2)
    array.write(Box((0, 0), SHAPE), VALUES)
    array.flush()
    array.close()
    yield tmp_path


def _stream_rows(array: ZarrArray, first: int, last: int) -> np.ndarray:
    stream = array.stream(Box((first, 0), (last, SHAPE[1])))
    assert stream is not None
    assert stream.wait(), f"the stream failed: {stream.error!r}"
    out = stream.out.copy()
    stream.close()
    return out


def _count_ranged_reads(array: ZarrArray, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    reads: list[Any] = []
    read = array.store.read

    def counting(key: str, byte_range: Any = None) -> Any:
        reads.append((key, byte_range))
        return read(key, byte_range)

    monkeypatch.setattr(array.store, "read", counting)
    return reads


def test_neighbouring_inner_chunks_are_read_with_one_request(stored: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    array = _open(stored)
    try:
        assert np.array_equal(_stream_rows(array, 0, INNER[0]), VALUES[: INNER[0]])  # reads the indexes
        reads = _count_ranged_reads(array, monkeypatch)
        got = _stream_rows(array, INNER[0], 2 * INNER[0])
        assert np.array_equal(got, VALUES[INNER[0] : 2 * INNER[0]])
        # 4 inner chunks, 2 in each shard lying next to each other: one read per shard.
        assert sorted(key for key, _ in reads) == ["c/0/0", "c/0/1"], reads
    finally:
        array.close()


def test_a_missing_inner_chunk_reads_as_the_fill_value(stored: Path) -> None:
    writer = _open(stored)
    writer.write(Box((0, 0), INNER), np.zeros(INNER, dtype="<u2"))  # all fill: no longer stored
    writer.flush()
    writer.close()
    expected = VALUES[: INNER[0]].copy()
    expected[:, : INNER[1]] = 0
    array = _open(stored)
    try:
        assert np.array_equal(_stream_rows(array, 0, INNER[0]), expected)
    finally:
        array.close()


def test_a_shard_rewritten_between_index_and_chunks_is_read_again(stored: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    array = _open(stored)
    try:
        _stream_rows(array, 0, INNER[0])  # the indexes are cached now
        rows = slice(INNER[0], 2 * INNER[0])
        expected = VALUES[rows].copy()
        read = array.store.read
        rewritten: list[str] = []

        def rewrite_first(key: str, byte_range: Any = None) -> Any:
            if not rewritten:  # another writer replaces this shard's row before this read
                rewritten.append(key)
                column = int(key.rsplit("/", 1)[1]) * SHARD[1]
                columns = slice(column, column + SHARD[1])
                expected[:, columns] += 7
                other = _open(stored)
                other.write(Box((rows.start, column), (rows.stop, columns.stop)), expected[:, columns])
                other.flush()
                other.close()
            return read(key, byte_range)

        monkeypatch.setattr(array.store, "read", rewrite_first)
        assert np.array_equal(_stream_rows(array, rows.start, rows.stop), expected)
        assert rewritten, "the shard was not read"
    finally:
        array.close()
