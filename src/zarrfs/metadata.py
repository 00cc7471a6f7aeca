"""Parse and validate a Zarr v3 array's `zarr.json` into immutable dataclasses.

Every problem raises `MetadataError` naming the member. Codec *specs* are parsed here only
as far as name and configuration; the codecs layer validates each configuration.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .dtypes import DataType, fill_value_to_json, parse_data_type, parse_fill_value
from .errors import MetadataError

MAX_RANK = 32
# A flat view must fit an off_t; anything near it is a mistake, not an array.
MAX_ARRAY_BYTES = 1 << 62
# One read chunk is decoded into memory at once.
MAX_CHUNK_BYTES = 1 << 32

_KNOWN_MEMBERS = {
    "zarr_format", "node_type", "shape", "data_type", "chunk_grid", "chunk_key_encoding",
    "fill_value", "codecs", "dimension_names", "attributes", "storage_transformers",
}


@dataclass(frozen=True)
class CodecSpec:
    """One entry of a `codecs` list: a name and its configuration, with where it came from."""

    name: str
    configuration: Mapping[str, Any]
    member: str  # e.g. "codecs[2]", for error messages

    def option(self, key: str) -> str:
        return f"{self.member}.configuration.{key}"


@dataclass(frozen=True)
class ChunkKeyEncoding:
    name: str  # "default" or "v2"
    separator: str

    def key(self, index: Sequence[int]) -> str:
        if self.name == "default":
            return self.separator.join(["c", *map(str, index)])
        return self.separator.join(map(str, index)) if index else "0"

    def parse(self, key: str, rank: int) -> tuple[int, ...] | None:
        """The grid index a key names, or None when it is not a well-formed key of this rank."""
        parts = key.split(self.separator)
        if self.name == "default":
            if parts[0] != "c":
                return None
            parts = parts[1:]
        elif rank == 0:
            return () if key == "0" else None
        if len(parts) != rank or not all(is_index_text(p) for p in parts):
            return None
        return tuple(int(p) for p in parts)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "configuration": {"separator": self.separator}}


def is_index_text(text: str) -> bool:
    """Whether `text` is a grid index as keys write it: ASCII digits, no leading zero.
    (str.isdigit alone admits '²' and digit strings too long for int().)"""
    return 0 < len(text) <= 20 and text.isascii() and text.isdigit() and (text == "0" or text[0] != "0")


@dataclass(frozen=True)
class ArrayMetadata:
    shape: tuple[int, ...]
    data_type: DataType
    chunk_shape: tuple[int, ...]
    chunk_key_encoding: ChunkKeyEncoding
    fill_value: bytes  # raw bits of one element, native byte order
    codecs: tuple[CodecSpec, ...]
    dimension_names: tuple[str | None, ...] | None = None
    attributes: Mapping[str, Any] = field(default_factory=dict)

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def grid_shape(self) -> tuple[int, ...]:
        return tuple(-(-s // c) for s, c in zip(self.shape, self.chunk_shape, strict=True))

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.data_type.itemsize

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "zarr_format": 3,
            "node_type": "array",
            "shape": list(self.shape),
            "data_type": self.data_type.name,
            "chunk_grid": {
                "name": "regular",
                "configuration": {"chunk_shape": list(self.chunk_shape)},
            },
            "chunk_key_encoding": self.chunk_key_encoding.to_json(),
            "fill_value": fill_value_to_json(self.fill_value, self.data_type),
            "codecs": [_codec_to_json(c) for c in self.codecs],
            "attributes": dict(self.attributes),
        }
        if self.dimension_names is not None:
            doc["dimension_names"] = list(self.dimension_names)
        return doc


def _codec_to_json(spec: CodecSpec) -> dict[str, Any]:
    if not spec.configuration:
        return {"name": spec.name}
    return {"name": spec.name, "configuration": dict(spec.configuration)}


def parse_metadata(raw: bytes | str) -> ArrayMetadata:
    """Parse the bytes of a `zarr.json` describing an array."""
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise MetadataError("zarr.json", f"not valid JSON ({e})") from None
    if not isinstance(doc, dict):
        raise MetadataError("zarr.json", "expected a JSON object")
    return metadata_from_json(doc)


def metadata_from_json(doc: Mapping[str, Any]) -> ArrayMetadata:
    if doc.get("zarr_format") != 3:
        raise MetadataError("zarr_format", f"expected 3, got {doc.get('zarr_format')!r}")
    if doc.get("node_type") != "array":
        raise MetadataError("node_type", f"expected 'array', got {doc.get('node_type')!r}")
    _check_extensions(doc)
    data_type = parse_data_type(_require(doc, "data_type"))
    shape = _parse_shape(_require(doc, "shape"), "shape", allow_zero=True)
    chunk_shape = _parse_chunk_grid(_require(doc, "chunk_grid"), len(shape))
    _check_sizes(shape, chunk_shape, data_type)
    return ArrayMetadata(
        shape=shape,
        data_type=data_type,
        chunk_shape=chunk_shape,
        chunk_key_encoding=_parse_key_encoding(_require(doc, "chunk_key_encoding")),
        fill_value=parse_fill_value(_require(doc, "fill_value"), data_type),
        codecs=parse_codec_list(_require(doc, "codecs"), "codecs"),
        dimension_names=_parse_dimension_names(doc.get("dimension_names"), len(shape)),
        attributes=_parse_attributes(doc.get("attributes", {})),
    )


def _require(doc: Mapping[str, Any], member: str) -> Any:
    if member not in doc:
        raise MetadataError(member, "missing")
    return doc[member]


def _check_extensions(doc: Mapping[str, Any]) -> None:
    for name, value in doc.items():
        if name in _KNOWN_MEMBERS:
            continue
        if isinstance(value, Mapping) and value.get("must_understand") is False:
            continue
        raise MetadataError(name, "unknown extension that must be understood")
    transformers = doc.get("storage_transformers", [])
    if transformers != []:
        raise MetadataError("storage_transformers", "storage transformers are not supported")


def _parse_shape(value: object, member: str, *, allow_zero: bool) -> tuple[int, ...]:
    if not isinstance(value, list):
        raise MetadataError(member, f"expected a list of integers, got {value!r}")
    if len(value) > MAX_RANK:
        raise MetadataError(member, f"rank {len(value)} is above the limit of {MAX_RANK}")
    lowest = 0 if allow_zero else 1
    for i, n in enumerate(value):
        if not isinstance(n, int) or isinstance(n, bool):
            raise MetadataError(f"{member}[{i}]", f"expected an integer, got {n!r}")
        if n < lowest:
            raise MetadataError(f"{member}[{i}]", f"must be at least {lowest}, got {n}")
    return tuple(value)


def _parse_chunk_grid(grid: object, rank: int) -> tuple[int, ...]:
    member = "chunk_grid"
    if not isinstance(grid, Mapping) or grid.get("name") != "regular":
        raise MetadataError(f"{member}.name", f"only the 'regular' chunk grid is supported: {grid!r}")
    config = grid.get("configuration")
    if not isinstance(config, Mapping) or "chunk_shape" not in config:
        raise MetadataError(f"{member}.configuration.chunk_shape", "missing")
    chunk_member = f"{member}.configuration.chunk_shape"
    chunk_shape = _parse_shape(config["chunk_shape"], chunk_member, allow_zero=False)
    if len(chunk_shape) != rank:
        raise MetadataError(chunk_member, f"rank {len(chunk_shape)} does not match shape rank {rank}")
    return chunk_shape


def _check_sizes(shape: tuple[int, ...], chunk_shape: tuple[int, ...], dtype: DataType) -> None:
    if math.prod(shape) * dtype.itemsize > MAX_ARRAY_BYTES:
        raise MetadataError("shape", f"{list(shape)} of {dtype.name} is too large to address")
    if math.prod(chunk_shape) * dtype.itemsize > MAX_CHUNK_BYTES:
        raise MetadataError(
            "chunk_grid.configuration.chunk_shape",
            f"{list(chunk_shape)} of {dtype.name} exceeds {MAX_CHUNK_BYTES} bytes per chunk",
        )


def _parse_key_encoding(value: object) -> ChunkKeyEncoding:
    member = "chunk_key_encoding"
    if isinstance(value, str):
        value = {"name": value}
    if not isinstance(value, Mapping):
        raise MetadataError(member, f"expected an object, got {value!r}")
    name = value.get("name")
    if name not in ("default", "v2"):
        raise MetadataError(f"{member}.name", f"unknown chunk key encoding {name!r}")
    config = value.get("configuration") or {}
    if not isinstance(config, Mapping):
        raise MetadataError(f"{member}.configuration", f"expected an object, got {config!r}")
    separator = config.get("separator", "/" if name == "default" else ".")
    if separator not in ("/", "."):
        raise MetadataError(f"{member}.configuration.separator", f"must be '/' or '.', got {separator!r}")
    return ChunkKeyEncoding(name, separator)


def parse_codec_list(value: object, member: str) -> tuple[CodecSpec, ...]:
    if not isinstance(value, list) or not value:
        raise MetadataError(member, f"expected a non-empty list of codecs, got {value!r}")
    specs = []
    for i, item in enumerate(value):
        where = f"{member}[{i}]"
        if isinstance(item, str):
            item = {"name": item}
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            raise MetadataError(where, f"expected an object with a name, got {item!r}")
        config = item.get("configuration", {})
        if not isinstance(config, Mapping):
            raise MetadataError(f"{where}.configuration", f"expected an object, got {config!r}")
        specs.append(CodecSpec(item["name"], dict(config), where))
    return tuple(specs)


def _parse_dimension_names(value: object, rank: int) -> tuple[str | None, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or len(value) != rank:
        raise MetadataError("dimension_names", f"expected a list of {rank} names, got {value!r}")
    for i, name in enumerate(value):
        if name is not None and not isinstance(name, str):
            raise MetadataError(f"dimension_names[{i}]", f"expected a string or null, got {name!r}")
    return tuple(value)


def _parse_attributes(value: object) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise MetadataError("attributes", f"expected an object, got {value!r}")
    return dict(value)
