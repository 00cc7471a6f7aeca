"""New arrays: their metadata files in the format of the group they are made in
(`new_array_files`, each format's `Format.new_array_files`, laid out by `layout`), and the
description of one made by `zarrfs create` or `zarrfs import` (`described_v3_array`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ZarrfsError
from . import v3
from .description import ArrayDescription, ChunkKeyEncoding
from .dtypes import CORE_TYPES, fill_value_to_json, parse_user_fill_value
from .layout import auto_chunks, check_codec
from .registry import FORMATS

__all__ = ["auto_chunks", "check_codec", "described_v3_array",
           "new_array_files"]


def new_array_files(zarr_format: int, shape: Sequence[int], dtype: np.dtype[Any],
                    chunks: Sequence[int] | None = None, codec: str = "zstd") -> dict[str, bytes]:
    """The metadata files of a new array of `dtype` (any byte order: stored little-endian),
    filled with zeros; `chunks` None: `layout.auto_chunks`. MetadataError when the format
    cannot hold the type, or `chunks` does not fit the shape."""
    return FORMATS[zarr_format].new_array_files(shape, dtype, chunks, codec)


def described_v3_array(shape: Sequence[int], data_type_name: str, chunks: Sequence[int], *,
                       shards: Sequence[int] | None = None, codec: str = "zstd:3", fill_value: str = "0",
                       dimension_names: Sequence[str] | None = None,
                       key_separator: str = "/") -> ArrayDescription:
    """A new Zarr v3 array as `zarrfs create` and `zarrfs import` make it: `chunks` are inner
    chunks when `shards` are given; `codec` is `zstd:LEVEL`, `gzip:LEVEL`,
    `blosc:CNAME:LEVEL` or `none`; `fill_value` as the user wrote it. ZarrfsError when the
    codec is not one of these, MetadataError when the rest does not make an array."""
    data_type = CORE_TYPES[data_type_name]
    inner = [_bytes_codec(data_type.itemsize), *_user_compressor(codec, data_type.itemsize)]
    codecs: list[dict[str, Any]] = inner
    if shards:
        codecs = [{"name": "sharding_indexed", "configuration": {
            "chunk_shape": list(chunks), "codecs": inner,
            "index_codecs": [_bytes_codec(8), {"name": "crc32c"}], "index_location": "end"}}]
    doc: dict[str, Any] = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": list(shape),
        "data_type": data_type.name,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(shards or chunks)}},
        "chunk_key_encoding": ChunkKeyEncoding("default", key_separator).to_json(),
        "fill_value": fill_value_to_json(parse_user_fill_value(fill_value, data_type), data_type),
        "codecs": codecs,
        "attributes": {},
    }
    if dimension_names is not None:
        doc["dimension_names"] = list(dimension_names)
    return v3.metadata_from_json(doc)


def _bytes_codec(itemsize: int) -> dict[str, Any]:
    if itemsize == 1:
        return {"name": "bytes"}
    return {"name": "bytes", "configuration": {"endian": "little"}}


def _user_compressor(text: str, itemsize: int) -> list[dict[str, Any]]:
    name, _, rest = text.partition(":")
    try:
        if name == "none":
            return []
        if name == "zstd":
            return [{"name": "zstd", "configuration": {"level": int(rest or 3), "checksum": False}}]
        if name == "gzip":
            return [{"name": "gzip", "configuration": {"level": int(rest or 6)}}]
        if name == "blosc":
            cname, _, level = rest.partition(":")
            return [{"name": "blosc", "configuration": {
                "cname": cname or "lz4", "clevel": int(level or 5), "shuffle": "shuffle",
                "typesize": itemsize, "blocksize": 0}}]
    except ValueError:
        pass
    raise ZarrfsError(f"--codec {text!r}: expected zstd:LEVEL, gzip:LEVEL, blosc:CNAME:LEVEL or none")
