"""Zarr v3: a `zarr.json` array document <-> an `ArrayDescription`.
(The rest of what the format does -- its nodes, the documents it writes -- is in `v3_format`.)

Every problem raises `MetadataError` naming the member. Codec configurations are parsed here
only as far as name and configuration; the codecs layer validates each one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import MetadataError
from ..rectilinear import RectilinearGrid, parse_rectilinear
from .description import (
    ArrayDescription,
    ChunkKeyEncoding,
    CodecSpec,
    check_sizes,
    load_json_object,
    parse_attributes,
    parse_chunk_shape,
    parse_shape,
    require,
)
from .dtypes import EXTENSION_TYPES, REGISTERED_TYPES, DataType, parse_fill_value

METADATA_KEY = "zarr.json"
_KNOWN_MEMBERS = {
    "zarr_format", "node_type", "shape", "data_type", "chunk_grid", "chunk_key_encoding",
    "fill_value", "codecs", "dimension_names", "attributes", "storage_transformers",
}
_TIME_UNITS = ("Y", "M", "W", "D", "h", "m", "s", "ms", "us", "μs", "ns", "ps", "fs", "as", "generic")


def parse_metadata(raw: bytes | str) -> ArrayDescription:
    """Parse the bytes of a `zarr.json` describing an array."""
    return metadata_from_json(load_json_object(raw, METADATA_KEY))


def metadata_from_json(doc: Mapping[str, Any]) -> ArrayDescription:
    if doc.get("zarr_format") != 3:
        raise MetadataError("zarr_format", f"expected 3, got {doc.get('zarr_format')!r}")
    if doc.get("node_type") != "array":
        raise MetadataError("node_type", f"expected 'array', got {doc.get('node_type')!r}")
    _check_extensions(doc)
    data_type = parse_data_type(require(doc, "data_type"))
    shape = parse_shape(require(doc, "shape"), "shape", allow_zero=True)
    chunk_shape, rectilinear = _parse_chunk_grid(require(doc, "chunk_grid"), shape)
    check_sizes(shape, chunk_shape, data_type,
                "chunk_grid.configuration" + (".chunk_shapes" if rectilinear else ".chunk_shape"))
    return ArrayDescription(
        shape=shape,
        data_type=data_type,
        chunk_shape=chunk_shape,
        chunk_key_encoding=_parse_key_encoding(require(doc, "chunk_key_encoding")),
        fill_value=parse_fill_value(require(doc, "fill_value"), data_type),
        codecs=parse_codec_list(require(doc, "codecs"), "codecs"),
        dimension_names=_parse_dimension_names(doc.get("dimension_names"), len(shape)),
        attributes=parse_attributes(doc.get("attributes", {})),
        zarr_format=3,
        rectilinear=rectilinear,
    )


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


# -- data types ----------------------------------------------------------------------------------


def parse_data_type(value: object, member: str = "data_type") -> DataType:
    """A core or registered type by name (alone or as an object without configuration), or one
    of zarr-python's fixed-size extension types."""
    if isinstance(value, str):
        if value in REGISTERED_TYPES:
            return REGISTERED_TYPES[value]
        bits = value[1:]
        if value.startswith("r") and bits.isascii() and bits.isdigit() and int(bits) % 8 == 0 and int(bits):
            return DataType.from_numpy(value, _numpy_dtype(f"V{int(bits) // 8}", member))
        raise MetadataError(member, f"unknown or unsupported data type {value!r}")
    if not isinstance(value, Mapping) or not isinstance(value.get("name"), str):
        raise MetadataError(member, f"expected a name or an object with a name, got {value!r}")
    name, config = value["name"], value.get("configuration", {})
    if not isinstance(config, Mapping):
        raise MetadataError(f"{member}.configuration", f"expected an object, got {config!r}")
    if name in REGISTERED_TYPES:
        if config:
            raise MetadataError(f"{member}.configuration", f"{name} takes no configuration: {dict(config)!r}")
        return REGISTERED_TYPES[name]
    return DataType.from_numpy(name, _extension_dtype(name, config, member))


def _numpy_dtype(spec: Any, member: str) -> np.dtype[Any]:
    """numpy's dtype for what a document asks; numpy refuses sizes, units and fields it cannot
    hold (a length of 10**15, a scale of 2**40 microseconds, a field named twice)."""
    try:
        dtype: np.dtype[Any] = np.dtype(spec)
    except (TypeError, ValueError) as e:
        raise MetadataError(member, f"not a data type numpy can hold: {e}") from None
    return dtype


def _extension_dtype(name: str, config: Mapping[str, Any], member: str) -> np.dtype[Any]:
    if name in ("numpy.datetime64", "numpy.timedelta64"):
        unit = config.get("unit")
        scale = config.get("scale_factor", 1)
        if unit not in _TIME_UNITS or not isinstance(scale, int) or isinstance(scale, bool) or scale < 1:
            raise MetadataError(f"{member}.configuration", f"bad unit or scale_factor: {dict(config)!r}")
        letter = "M8" if name == "numpy.datetime64" else "m8"
        return _numpy_dtype(f"{letter}[{'' if scale == 1 else scale}{unit}]", f"{member}.configuration")
    if name in ("fixed_length_utf32", "null_terminated_bytes", "raw_bytes"):
        length = config.get("length_bytes")
        unit = 4 if name == "fixed_length_utf32" else 1
        if not isinstance(length, int) or isinstance(length, bool) or length < unit or length % unit:
            raise MetadataError(f"{member}.configuration.length_bytes", f"bad length {length!r}")
        letter = {"fixed_length_utf32": "U", "null_terminated_bytes": "S", "raw_bytes": "V"}[name]
        return _numpy_dtype(f"{letter}{length // unit}", f"{member}.configuration.length_bytes")
    if name == "structured":
        fields = config.get("fields")
        if not isinstance(fields, list) or not fields:
            raise MetadataError(f"{member}.configuration.fields", f"expected a list of fields: {fields!r}")
        where = f"{member}.configuration.fields"
        return _numpy_dtype([_field(item, f"{where}[{i}]") for i, item in enumerate(fields)], where)
    raise MetadataError(member, f"unknown or unsupported data type {name!r}")


def _field(item: object, member: str) -> tuple[str, np.dtype[Any]]:
    if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)):
        raise MetadataError(member, f"expected [name, data type], got {item!r}")
    field_type = parse_data_type(item[1], f"{member}[1]")
    if field_type.name in ("int4", "bfloat16") or field_type.name in EXTENSION_TYPES:
        raise MetadataError(f"{member}[1]", f"{field_type.name} cannot be a field of a record")
    # Fields are stored little-endian (zarr-python writes no byte order for them).
    return item[0], field_type.storage.newbyteorder("<")


# -- chunking and codecs ---------------------------------------------------------------------------


def _parse_chunk_grid(grid: object, shape: tuple[int, ...]) -> tuple[tuple[int, ...], RectilinearGrid | None]:
    """The chunk shape (of a rectilinear grid: the largest edges) and the rectilinear grid."""
    member = "chunk_grid"
    if isinstance(grid, Mapping) and grid.get("name") == "rectilinear":
        rectilinear = parse_rectilinear(grid.get("configuration"), shape, member)
        return rectilinear.largest, rectilinear
    if not isinstance(grid, Mapping) or grid.get("name") != "regular":
        raise MetadataError(f"{member}.name",
                            f"only the 'regular' and 'rectilinear' chunk grids are supported: {grid!r}")
    config = grid.get("configuration")
    if not isinstance(config, Mapping) or "chunk_shape" not in config:
        raise MetadataError(f"{member}.configuration.chunk_shape", "missing")
    return parse_chunk_shape(config["chunk_shape"], f"{member}.configuration.chunk_shape", len(shape)), None


def resized_grid(doc: dict[str, Any], shape: list[int]) -> None:
    """Give an array document a new shape, and its rectilinear grid the edges that covers."""
    grid = doc.get("chunk_grid")
    if isinstance(grid, Mapping) and grid.get("name") == "rectilinear":
        old = parse_shape(doc.get("shape"), "shape", allow_zero=True)
        parsed = parse_rectilinear(grid.get("configuration"), old, "chunk_grid")
        doc["chunk_grid"] = parsed.resized(shape).to_json()
    doc["shape"] = shape


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
