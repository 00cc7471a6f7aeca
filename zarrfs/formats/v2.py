"""Zarr v2: a `.zarray` document (with `.zattrs`) -> an `ArrayDescription`.
(The rest of what the format does -- its nodes, the documents it writes -- is in `v2_format`.)

The chain in v3 terms: `order: F` is a transpose reversing the axes; the array is serialized
in its dtype's own byte order (the bytes codec follows `DataType.stored`); the filters and
then the compressor run on those bytes, through numcodecs, exactly as zarr-python does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import MetadataError
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
from .dtypes import DataType, parse_fill_value

METADATA_KEY = ".zarray"
ATTRIBUTES_KEY = ".zattrs"
GROUP_KEY = ".zgroup"
CONSOLIDATED_KEY = ".zmetadata"
# Filters and compressors run on the serialized bytes (see zarrfs.codecs.numcodecs_adapter).
BUFFER_CODEC_PREFIX = "numcodecs-buffer."


def parse_metadata(raw: bytes | str, attributes: bytes | str | None = None) -> ArrayDescription:
    doc = load_json_object(raw, METADATA_KEY)
    attrs = {} if attributes is None else load_json_object(attributes, ATTRIBUTES_KEY)
    return metadata_from_json(doc, attrs)


def metadata_from_json(doc: Mapping[str, Any], attributes: Mapping[str, Any]) -> ArrayDescription:
    if doc.get("zarr_format") != 2:
        raise MetadataError("zarr_format", f"expected 2, got {doc.get('zarr_format')!r}")
    shape = parse_shape(require(doc, "shape"), "shape", allow_zero=True)
    chunk_shape = parse_chunk_shape(require(doc, "chunks"), "chunks", len(shape))
    data_type = parse_dtype(require(doc, "dtype"))
    check_sizes(shape, chunk_shape, data_type, "chunks")
    order = parse_order(require(doc, "order"))
    separator = doc.get("dimension_separator", ".")
    if separator not in (".", "/"):
        raise MetadataError("dimension_separator", f"must be '.' or '/', got {separator!r}")
    codecs = [
        *transpose_for(order, len(shape)),
        CodecSpec("bytes", {}, "dtype"),
        *(buffer_codec(f, f"filters[{i}]")
          for i, f in enumerate(_list_or_none(doc.get("filters"), "filters"))),
    ]
    compressor = doc.get("compressor")
    if compressor is not None:
        codecs.append(buffer_codec(compressor, "compressor"))
    return ArrayDescription(
        shape=shape,
        data_type=data_type,
        chunk_shape=chunk_shape,
        chunk_key_encoding=ChunkKeyEncoding("v2", separator),
        fill_value=parse_v2_fill_value(require(doc, "fill_value"), data_type),
        codecs=tuple(codecs),
        dimension_names=_dimension_names(attributes, len(shape)),
        attributes=parse_attributes(attributes, ATTRIBUTES_KEY),
        zarr_format=2,
        fill_value_stated=doc["fill_value"] is not None,
    )



def parse_dtype(value: object, member: str = "dtype") -> DataType:
    """A typestr ("<u2", "|S6", "<M8[ns]") or a structured descr (a list of [name, type(, shape)])."""
    try:
        dtype = np.dtype(_descr(value))
    except (TypeError, ValueError, SyntaxError) as e:
        raise MetadataError(member, f"not a data type: {value!r} ({e})") from None
    if dtype.hasobject:
        raise MetadataError(member, f"{value!r}: object (variable-length) elements have no fixed size")
    if isinstance(value, str) and value[:1] not in ("<", ">", "|"):
        raise MetadataError(member, f"{value!r} does not give a byte order (<, > or |)")
    if dtype.subdtype is not None:
        raise MetadataError(member, f"{value!r}: sub-array data types are not supported")
    return DataType.from_numpy(str(value) if isinstance(value, str) else "structured", dtype, stored=True)


def _descr(value: object) -> Any:
    """numpy's descr from its JSON form (lists where numpy wants tuples), nested records too."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list) or not value:
        raise TypeError("expected a typestr or a list of fields")
    fields = []
    for item in value:
        if not isinstance(item, list) or not 2 <= len(item) <= 3 or not isinstance(item[0], str):
            raise TypeError(f"bad field {item!r}")
        shape = [tuple(item[2])] if len(item) == 3 else []
        fields.append((item[0], _descr(item[1]), *shape))
    return fields


def parse_order(value: object) -> str:
    if value not in ("C", "F"):
        raise MetadataError("order", f"expected 'C' or 'F', got {value!r}")
    return str(value)


def transpose_for(order: str, rank: int) -> list[CodecSpec]:
    if order == "C" or rank < 2:
        return []
    return [CodecSpec("transpose", {"order": list(range(rank))[::-1]}, "order")]


def buffer_codec(config: object, member: str) -> CodecSpec:
    """A numcodecs codec given as {"id": ..., ...}, run on the serialized bytes."""
    if not isinstance(config, Mapping) or not isinstance(config.get("id"), str):
        raise MetadataError(f"{member}.id", f"expected a codec object with an id, got {config!r}")
    options = {k: v for k, v in config.items() if k != "id"}
    return CodecSpec(BUFFER_CODEC_PREFIX + config["id"], options, member)


def _list_or_none(value: object, member: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise MetadataError(member, f"expected a list or null, got {value!r}")
    return value


def parse_v2_fill_value(value: object, data_type: DataType) -> bytes:
    """v2's fill forms: numbers and the float words, base64 for bytes and records, text for
    unicode. null is undefined in the spec; zarr-python reads such chunks as zeros (NaT for
    datetimes), and so does zarrfs."""
    if value is None:
        if data_type.kind == "datetime":  # zarr-python reads these as NaT, not as zero
            return parse_fill_value("NaT", data_type)
        return bytes(data_type.itemsize)
    if data_type.kind == "complex" and isinstance(value, int | float) and not isinstance(value, bool):
        value = [value, 0]
    if data_type.kind == "bool" and isinstance(value, int) and value in (0, 1):
        value = bool(value)
    if numeric_text_fill(value) and (data_type.kind == "string" or data_type.storage.kind == "S"):
        # zarr-python 2 wrote 0 for text and bytes arrays, and fills with numpy's text of it
        return np.array(value).astype(data_type.storage).tobytes()
    return parse_fill_value(value, data_type)


def numeric_text_fill(value: object) -> bool:
    """A number (or true/false) where text is stored: what zarr-python 2 wrote as the fill of
    string and bytes arrays by default (0), reading it as numpy's text of it ("0")."""
    return isinstance(value, int | float)


def _dimension_names(attributes: Mapping[str, Any], rank: int) -> tuple[str | None, ...] | None:
    """xarray keeps v2 dimension names in the `_ARRAY_DIMENSIONS` attribute."""
    names = attributes.get("_ARRAY_DIMENSIONS")
    if isinstance(names, list) and len(names) == rank and all(isinstance(n, str) for n in names):
        return tuple(names)
    return None
