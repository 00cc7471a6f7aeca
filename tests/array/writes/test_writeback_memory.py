"""What a write-back holds counts against the cache, without FUSE: a shard rebuilt around a
partial write holds the stored shard it read until the new one is stored, and clean chunks
make room for it, so that memory stays within the cache's bound (issue 62)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.helpers.cache_watch import cached_bytes_at_puts
from zarrfs.array_metadata import create_array, open_array
from zarrfs.formats.v3 import metadata_from_json
from zarrfs.grid import Box
from zarrfs.store import Store

pytestmark = pytest.mark.fast

SHAPE = (64, 96)
SHARD = (16, 32)
SHARD_BYTES = SHARD[0] * SHARD[1] * 2
WHOLE = Box((0, 0), SHAPE)
BYTES = {"name": "bytes", "configuration": {"endian": "little"}}


def _stored_noise(path: Path) -> np.ndarray:
    """A uint16 array of 16x32 zstd shards of 16x16 inner chunks, holding values zstd cannot
    shrink (so the stored shard weighs what its chunks do), and those values."""
    doc = {
        "zarr_format": 3, "node_type": "array", "shape": list(SHAPE), "data_type": "uint16",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(SHARD)}},
        "chunk_key_encoding": {"name": "default"}, "fill_value": 0,
        "codecs": [{"name": "sharding_indexed", "configuration": {
            "chunk_shape": [16, 16], "codecs": [BYTES, {"name": "zstd", "configuration": {"level": 1}}],
            "index_codecs": [BYTES, {"name": "crc32c"}]}}],
    }
    values = np.random.default_rng(62).integers(0, 1 << 16, SHAPE, dtype="<u2")
    array = create_array(Store.open(str(path)), metadata_from_json(doc), threads=2)
    try:
        array.write(WHOLE, values)
        array.flush()
    finally:
        array.close()
    return values


def test_a_shard_rebuilt_around_a_partial_write_counts_the_stored_shard(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    values = _stored_noise(tmp_path)
    stored_bytes = (tmp_path / "c" / "0" / "0").stat().st_size
    assert stored_bytes >= SHARD_BYTES  # (incompressible: the test's premise)
    array = open_array(Store.open(str(tmp_path)), threads=2, cache_bytes=6 * SHARD_BYTES)
    try:
        others = Box((SHARD[0], 0), SHAPE)  # all but the first row of shards: more than fits
        assert np.array_equal(array.read(others), values[SHARD[0]:])
        cache = array.cache
        clean_at_put = cached_bytes_at_puts(array, monkeypatch)
        corner = Box((0, 0), (4, 4))  # part of one inner chunk: the stored shard is read
        array.write(corner, np.full(corner.shape, 7, dtype="<u2"))
        array.flush()
        # Held at the put: the cache's entries, the stored shard, the new inner chunk.
        (clean,) = clean_at_put
        assert clean + stored_bytes + 16 * 16 * 2 <= cache.capacity
        with cache.lock:  # the hold ended: the cache counts its entries and nothing else
            assert cache.total_bytes == sum(e.nbytes for e in cache.entries.values()) + cache.reserved_bytes
        expected = values.copy()
        expected[:4, :4] = 7
        assert np.array_equal(array.read(WHOLE), expected)
    finally:
        array.close()
