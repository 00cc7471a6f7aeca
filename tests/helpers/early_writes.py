"""What the tests of storing chunks ahead of a flush (tests/array/writes/test_early_writes_*.py)
share: a local array (plain or sharded, 64 x 96 int16 in 16 x 32 chunks) without FUSE, writes
of seeded values into it, and what it and its store hold."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from tests.helpers.mounting import wait_until
from zarrfs.array import ZarrArray
from zarrfs.array_metadata import create_array
from zarrfs.formats.v3 import metadata_from_json
from zarrfs.grid import Box
from zarrfs.store import Store

SHAPE = (64, 96)
CHUNKS = (16, 32)
INNER = (16, 16)
ZSTD = {"name": "zstd", "configuration": {"level": 1}}
BYTES = {"name": "bytes", "configuration": {"endian": "little"}}


def local_array(path: Path, sharded: bool = False, cache_bytes: int | None = None) -> ZarrArray:
    codecs: list[Any] = [BYTES, ZSTD]
    if sharded:
        codecs = [{"name": "sharding_indexed", "configuration": {
            "chunk_shape": list(INNER), "codecs": codecs,
            "index_codecs": [BYTES, {"name": "crc32c"}]}}]
    doc = {
        "zarr_format": 3, "node_type": "array", "shape": list(SHAPE), "data_type": "uint16",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(CHUNKS)}},
        "chunk_key_encoding": {"name": "default"}, "fill_value": 0, "codecs": codecs,
    }
    return create_array(Store.open(str(path)), metadata_from_json(doc), threads=2,
                            cache_bytes=cache_bytes)


def settled(array: ZarrArray) -> None:
    wait_until(lambda: not array.early.jobs, what="early write-backs finishing")


def write_seeded(array: ZarrArray, box: Box, seed: int) -> None:
    """Write `box` and wait until what it made whole is stored."""
    array.write(box, seeded(box, seed=seed))
    settled(array)


def seeded(box: Box, seed: int = 1) -> np.ndarray:
    return (np.arange(box.size, dtype="<u2") * 3 + seed).reshape(box.shape)
