"""The interop matrix's `zarr.json` documents (interop_cases.py): codecs, the array's document,
and its chunk keys."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tests.helpers.interop_values import STORAGE


def bytes_codec(endian: str | None = "little") -> dict[str, Any]:
    if endian is None:
        return {"name": "bytes"}
    return {"name": "bytes", "configuration": {"endian": endian}}


def default_bytes(data_type: str, endian: str = "little") -> dict[str, Any]:
    """`bytes`, without `endian` for one-byte types (the spec allows leaving it out)."""
    return bytes_codec(None if STORAGE[data_type].itemsize == 1 else endian)


def transpose(order: Any) -> dict[str, Any]:
    return {"name": "transpose", "configuration": {"order": order}}


def gzip(level: int) -> dict[str, Any]:
    return {"name": "gzip", "configuration": {"level": level}}


def zstd(level: int, checksum: bool = False) -> dict[str, Any]:
    return {"name": "zstd", "configuration": {"level": level, "checksum": checksum}}


def blosc(cname: str, clevel: int, shuffle: str, typesize: int | None, blocksize: int = 0) -> dict[
    str, Any
]:
    config: dict[str, Any] = {
        "cname": cname, "clevel": clevel, "shuffle": shuffle, "blocksize": blocksize
    }
    if typesize is not None:
        config["typesize"] = typesize
    return {"name": "blosc", "configuration": config}


CRC32C = {"name": "crc32c"}


def sharding(
    chunk_shape: Sequence[int],
    codecs: list[dict[str, Any]],
    index_codecs: list[dict[str, Any]] | None = None,
    location: str = "end",
) -> dict[str, Any]:
    return {
        "name": "sharding_indexed",
        "configuration": {
            "chunk_shape": list(chunk_shape),
            "codecs": codecs,
            "index_codecs": index_codecs or [bytes_codec(), CRC32C],
            "index_location": location,
        },
    }


def array_json(
    data_type: str,
    shape: Sequence[int],
    chunks: Sequence[int],
    codecs: list[dict[str, Any]],
    fill: Any = 0,
    key: tuple[str, str] = ("default", "/"),
    dimension_names: list[str | None] | None = None,
) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": list(shape),
        "data_type": data_type,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunks)}},
        "chunk_key_encoding": {"name": key[0], "configuration": {"separator": key[1]}},
        "fill_value": fill,
        "codecs": codecs,
        "attributes": {"case": "interop"},
    }
    if dimension_names is not None:
        doc["dimension_names"] = dimension_names
    return doc


def chunk_key(doc: dict[str, Any], index: Sequence[int]) -> str:
    encoding = doc["chunk_key_encoding"]
    name = encoding["name"]
    default = "/" if name == "default" else "."
    separator = encoding.get("configuration", {}).get("separator", default)
    if name == "default":
        return separator.join(["c", *map(str, index)])
    return separator.join(map(str, index)) if index else "0"


def is_default_dot(doc: dict[str, Any]) -> bool:
    encoding = doc["chunk_key_encoding"]
    separator = encoding.get("configuration", {}).get("separator", "/")
    return bool(encoding["name"] == "default" and separator == ".")
