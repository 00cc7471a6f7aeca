"""The format-neutral description of an array: what every layer below `formats` sees.

Zarr v3, v2 and v1 metadata all become an `ArrayDescription`: shape, data type, chunk grid
(regular, or v3's rectilinear: zarrfs.rectilinear), chunk key encoding, fill value bits and a
codec chain in v3 terms (v2's `order: F` is a transpose, its filters and compressor run on the
serialized bytes, its dtype's byte order is the bytes codec's). Nothing below this layer asks
which format it serves.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import MetadataError
from ..grid import Box, Piece, cells_of
from ..rectilinear import RectilinearGrid
from .dtypes import DataType, fill_value_to_json

MAX_RANK = 32
# A flat view must fit an off_t; anything near it is a mistake, not an array.
MAX_ARRAY_BYTES = 1 << 62
# One read chunk is decoded into memory at once.
MAX_CHUNK_BYTES = 1 << 32


@dataclass(frozen=True)
class CodecSpec:
    """One codec of a chain: a name and its configuration, with where it came from."""

    name: str
    configuration: Mapping[str, Any]
    member: str  # e.g. "codecs[2]" or "compressor", for error messages

    def option(self, key: str) -> str:
        return f"{self.member}.configuration.{key}"


@dataclass(frozen=True)
class ChunkKeyEncoding:
    name: str  # "default" (v3) or "v2" (v3's v2 encoding, v2 and v1)
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
class ArrayDescription:
    shape: tuple[int, ...]
    data_type: DataType
    # The regular grid's chunk shape; of a rectilinear grid, the largest edge along each axis
    # (every chunk fits in it: the array layer caches its chunks in buffers of this shape).
    chunk_shape: tuple[int, ...]
    chunk_key_encoding: ChunkKeyEncoding
    fill_value: bytes  # raw bits of one element, native byte order
    codecs: tuple[CodecSpec, ...]
    dimension_names: tuple[str | None, ...] | None = None
    attributes: Mapping[str, Any] = field(default_factory=dict)
    zarr_format: int = 3
    rectilinear: RectilinearGrid | None = None  # None: the regular grid of `chunk_shape`
    # False: the document states no fill value (v2's null), and `fill_value` is the zeros read
    # in its place (xarray then masks nothing).
    fill_value_stated: bool = True

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def is_regular(self) -> bool:
        """Whether every chunk has the shape `chunk_shape` (views that need equal tiles ask)."""
        return self.rectilinear is None

    @property
    def grid_shape(self) -> tuple[int, ...]:
        if self.rectilinear is not None:
            return self.rectilinear.grid_shape(self.shape)
        return tuple(-(-s // c) for s, c in zip(self.shape, self.chunk_shape, strict=True))

    def chunk_box(self, index: Sequence[int]) -> Box:
        """Where chunk `index` lies in array coordinates (an edge chunk's overhang included)."""
        if self.rectilinear is not None:
            return self.rectilinear.chunk_box(index)
        start = tuple(i * c for i, c in zip(index, self.chunk_shape, strict=True))
        return Box(start, tuple(s + c for s, c in zip(start, self.chunk_shape, strict=True)))

    def cells_of(self, box: Box) -> Iterator[Piece]:
        """The chunks `box` touches, with the part of it in each (grid.cells_of)."""
        if self.rectilinear is not None:
            return self.rectilinear.cells_of(box)
        return cells_of(box, self.chunk_shape)

    def covered(self, shape: Sequence[int] | None = None) -> tuple[int, ...]:
        """Where the chunks overlapping the array (of `shape`, or its own) end on each axis."""
        shape = self.shape if shape is None else shape
        if self.rectilinear is not None:
            return self.rectilinear.covered(shape)
        return tuple(-(-n // c) * c for n, c in zip(shape, self.chunk_shape, strict=True))

    def resized(self, shape: tuple[int, ...]) -> ArrayDescription:
        """The description after a resize (a rectilinear grid may gain an edge)."""
        if self.rectilinear is None:
            return dataclasses.replace(self, shape=shape)
        grid = self.rectilinear.resized(shape)
        return dataclasses.replace(self, shape=shape, rectilinear=grid, chunk_shape=grid.largest)

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.data_type.itemsize

    def to_json(self) -> dict[str, Any]:
        """The Zarr v3 document of a description whose codecs are v3 codecs."""
        return description_to_json(self)


@dataclass(frozen=True)
class VariableDescription:
    """An array of strings or bytes (zarrfs.formats.variable): no fixed size, no flat view."""

    grid: ArrayDescription  # shape, chunk grid, keys, names, attributes (its data type a stand-in)
    kind: str  # "string" or "bytes"
    fill: str | bytes
    codecs: tuple[CodecSpec, ...]  # the vlen codec first, then bytes->bytes codecs
    order: str = "C"  # of the elements in a chunk (v2's `order`)


def description_to_json(description: ArrayDescription) -> dict[str, Any]:
    """The Zarr v3 array document (here, not in v3.py, which reads documents into descriptions)."""
    doc: dict[str, Any] = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": list(description.shape),
        "data_type": description.data_type.name,
        "chunk_grid": _grid_to_json(description),
        "chunk_key_encoding": description.chunk_key_encoding.to_json(),
        "fill_value": fill_value_to_json(description.fill_value, description.data_type),
        "codecs": [_codec_to_json(c) for c in description.codecs],
        "attributes": dict(description.attributes),
    }
    if description.dimension_names is not None:
        doc["dimension_names"] = list(description.dimension_names)
    return doc


def _grid_to_json(description: ArrayDescription) -> dict[str, Any]:
    if description.rectilinear is not None:
        return description.rectilinear.to_json()
    return {"name": "regular", "configuration": {"chunk_shape": list(description.chunk_shape)}}


def _codec_to_json(spec: CodecSpec) -> dict[str, Any]:
    if not spec.configuration:
        return {"name": spec.name}
    return {"name": spec.name, "configuration": dict(spec.configuration)}


def require(doc: Mapping[str, Any], member: str) -> Any:
    if member not in doc:
        raise MetadataError(member, "missing")
    return doc[member]


def parse_shape(value: object, member: str, *, allow_zero: bool) -> tuple[int, ...]:
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


def parse_chunk_shape(value: object, member: str, rank: int) -> tuple[int, ...]:
    chunk_shape = parse_shape(value, member, allow_zero=False)
    if len(chunk_shape) != rank:
        raise MetadataError(member, f"rank {len(chunk_shape)} does not match shape rank {rank}")
    return chunk_shape


def check_sizes(
    shape: tuple[int, ...], chunk_shape: tuple[int, ...], dtype: DataType, chunk_member: str
) -> None:
    if math.prod(shape) * dtype.itemsize > MAX_ARRAY_BYTES:
        raise MetadataError("shape", f"{list(shape)} of {dtype.name} is too large to address")
    if math.prod(chunk_shape) * dtype.itemsize > MAX_CHUNK_BYTES:
        raise MetadataError(
            chunk_member, f"{list(chunk_shape)} of {dtype.name} exceeds {MAX_CHUNK_BYTES} bytes per chunk"
        )


def parse_attributes(value: object, member: str = "attributes") -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise MetadataError(member, f"expected an object, got {value!r}")
    return dict(value)


def load_json_object(raw: bytes | str, name: str) -> dict[str, Any]:
    """A metadata document's JSON object; every problem is a MetadataError naming the file."""
    import json

    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise MetadataError(name, f"not valid JSON ({e})") from None
    if not isinstance(doc, dict):
        raise MetadataError(name, "expected a JSON object")
    return doc
