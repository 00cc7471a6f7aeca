"""Arrays made in a local directory with zarrfs's own writer, for tests without FUSE."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from zarrfs.array import ZarrArray
from zarrfs.array_metadata import create_array
from zarrfs.formats.v3 import metadata_from_json
from zarrfs.grid import Box
from zarrfs.store import Store


def create_zstd_array(path: Path, values: np.ndarray, chunks: tuple[int, ...]) -> None:
    """A Zarr v3 array at `path` holding `values` (little-endian, zstd level 1), stored and closed."""
    doc = {
        "zarr_format": 3, "node_type": "array", "shape": list(values.shape),
        "data_type": values.dtype.name,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunks)}},
        "chunk_key_encoding": {"name": "default"}, "fill_value": 0,
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                   {"name": "zstd", "configuration": {"level": 1}}],
    }
    array = create_array(Store.open(str(path)), metadata_from_json(doc), threads=2)
    try:
        array.write(Box((0,) * values.ndim, values.shape), values)
        array.flush()
    finally:
        array.close()


def create_uint16_zstd(path: Path, shape: tuple[int, ...], chunks: tuple[int, ...], *,
                       inner: tuple[int, ...] | None = None, fill_value: int = 0) -> ZarrArray:
    """A new Zarr v3 uint16 array at `path` in `chunks` (zstd level 1; with `inner`, shards of
    inner chunks of that shape), nothing stored, opened (the caller closes it)."""
    bytes_codec = {"name": "bytes", "configuration": {"endian": "little"}}
    codecs: list[Any] = [bytes_codec, {"name": "zstd", "configuration": {"level": 1}}]
    if inner is not None:
        codecs = [{"name": "sharding_indexed", "configuration": {
            "chunk_shape": list(inner), "codecs": codecs, "index_codecs": [bytes_codec, {"name": "crc32c"}]}}]
    doc = {
        "zarr_format": 3, "node_type": "array", "shape": list(shape), "data_type": "uint16",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunks)}},
        "chunk_key_encoding": {"name": "default"}, "fill_value": fill_value, "codecs": codecs,
    }
    return create_array(Store.open(str(path)), metadata_from_json(doc), threads=2)
