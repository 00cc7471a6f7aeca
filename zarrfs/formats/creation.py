"""New arrays: the chunk shape chosen when none is given, the codecs of a new array, and its
metadata files in either format (v3 zarr.json; v2 .zarray and .zattrs); the description of
one made by `zarrfs create` or `zarrfs import` (`described_v3_array`).

The chunk rule (`auto_chunks`) is TensorStore's and zarr-python's idea: chunks of about
`TARGET_CHUNK_BYTES`, made of whole rows of the last dimensions first, so that reading a row
of the array touches one chunk, and reading `data` in order touches chunks one after another.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import MetadataError, ZarrfsError
from . import v2, v3
from .description import ArrayDescription, ChunkKeyEncoding
from .documents import dump
from .dtypes import CORE_TYPES, DataType, fill_value_to_json, parse_user_fill_value

TARGET_CHUNK_BYTES = 1 << 20
CODEC_NAMES = ("zstd", "gzip", "blosc", "none")
_DEFAULT_LEVELS = {"zstd": 3, "gzip": 6, "blosc": 5}
_NO_NEW_TYPES = ("int4", "bfloat16")  # (no .npy stream carries them)


def auto_chunks(shape: Sequence[int], itemsize: int, target: int = TARGET_CHUNK_BYTES) -> tuple[int, ...]:
    """A chunk shape of about `target` bytes: whole extents of the last dimensions while they
    fit, then as many rows of the next as fit (at least one), then 1."""
    chunks = [1] * len(shape)
    room = max(1, target // max(1, itemsize))  # elements a chunk may still hold
    for dim in reversed(range(len(shape))):
        extent = max(1, shape[dim])
        if extent <= room:
            chunks[dim] = extent
            room //= extent
            continue
        chunks[dim] = max(1, room)
        break
    return tuple(chunks)


def check_codec(text: str) -> str:
    """`zstd`, `zstd:LEVEL`, `gzip[:LEVEL]`, `blosc[:LEVEL]` or `none`; ValueError otherwise."""
    name, _, level = text.partition(":")
    if name not in CODEC_NAMES or (level and (name == "none" or not level.isdigit())):
        raise ValueError(text)
    return text


def new_array_files(zarr_format: int, shape: Sequence[int], dtype: np.dtype[Any],
                    chunks: Sequence[int] | None = None, codec: str = "zstd") -> dict[str, bytes]:
    """The metadata files of a new array of `dtype` (any byte order: stored little-endian),
    filled with zeros; `chunks` None: `auto_chunks`. MetadataError when the format cannot
    hold the type, or `chunks` does not fit the shape."""
    data_type = _data_type(zarr_format, dtype)
    chunk_shape = tuple(chunks) if chunks is not None else auto_chunks(shape, data_type.itemsize)
    if len(chunk_shape) != len(shape) or min(chunk_shape, default=1) < 1:
        raise MetadataError("chunks", f"{list(chunk_shape)} does not fit an array of shape {list(shape)}")
    name, level = _codec(check_codec(codec))
    fill = fill_value_to_json(bytes(data_type.itemsize), data_type)
    if zarr_format == 3:
        return {v3.METADATA_KEY: dump(_v3_document(shape, data_type, chunk_shape, name, level, fill), 3)}
    compressor = _v2_compressor(name, level, data_type.itemsize)
    doc = {"zarr_format": 2, "shape": list(shape), "chunks": list(chunk_shape),
           "dtype": data_type.name, "compressor": compressor, "fill_value": fill, "order": "C",
           "filters": None, "dimension_separator": "."}
    return {v2.METADATA_KEY: dump(doc, 2), v2.ATTRIBUTES_KEY: dump({}, 2)}


def _data_type(zarr_format: int, dtype: np.dtype[Any]) -> DataType:
    native = dtype.newbyteorder("=")
    if dtype.fields is None and dtype.subdtype is None and dtype.kind in "biufcMm":
        if zarr_format == 2:
            little = dtype.newbyteorder("<") if dtype.itemsize > 1 else dtype
            return DataType.from_numpy(little.str, native, stored=True)
        for name, known in CORE_TYPES.items():
            if known.storage == native and name not in _NO_NEW_TYPES:
                return known
        if dtype.kind in "Mm":
            name = "numpy.datetime64" if dtype.kind == "M" else "numpy.timedelta64"
            return DataType.from_numpy(name, native)
    raise MetadataError("dtype", f"{dtype.str} cannot be stored in a Zarr v{zarr_format} array")


def _v3_document(shape: Sequence[int], data_type: DataType, chunks: Sequence[int], codec: str,
                 level: int, fill: Any) -> dict[str, Any]:
    data_type_json: Any = data_type.name
    if data_type.kind == "datetime":
        unit, scale = np.datetime_data(data_type.storage)
        data_type_json = {"name": data_type.name, "configuration": {"unit": unit, "scale_factor": scale}}
    codecs: list[dict[str, Any]] = [{"name": "bytes"} if data_type.itemsize == 1 else
                                    {"name": "bytes", "configuration": {"endian": "little"}}]
    if codec == "zstd":
        codecs.append({"name": "zstd", "configuration": {"level": level, "checksum": False}})
    elif codec == "gzip":
        codecs.append({"name": "gzip", "configuration": {"level": level}})
    elif codec == "blosc":
        codecs.append({"name": "blosc", "configuration": {
            "cname": "lz4", "clevel": level, "shuffle": "shuffle" if data_type.itemsize > 1 else "bitshuffle",
            "typesize": data_type.itemsize, "blocksize": 0}})
    return {"shape": list(shape), "data_type": data_type_json,
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunks)}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": fill, "codecs": codecs, "attributes": {}, "zarr_format": 3,
            "node_type": "array", "storage_transformers": []}


def _v2_compressor(codec: str, level: int, itemsize: int) -> dict[str, Any] | None:
    if codec == "zstd":
        return {"id": "zstd", "level": level}
    if codec == "gzip":
        return {"id": "gzip", "level": level}
    if codec == "blosc":
        return {"id": "blosc", "cname": "lz4", "clevel": level, "shuffle": 1 if itemsize > 1 else 2,
                "blocksize": 0}
    return None


def _codec(text: str) -> tuple[str, int]:
    name, _, level = text.partition(":")
    return name, int(level) if level else _DEFAULT_LEVELS.get(name, 0)


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
