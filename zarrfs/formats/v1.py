"""Zarr v1: the `meta` document (with `attrs`) -> an `ArrayDescription`.
(The rest of what the format does -- its nodes, the documents it writes -- is in `v1_format`.)

v1 (the spec in shared/reference) has one compressor and no filters: `compression` is
none, zlib, bz2 or blosc with `compression_opts`; chunk keys are `i.j.k`.
"""

from __future__ import annotations

from collections.abc import Mapping

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
from .dtypes import DataType
from .v2 import BUFFER_CODEC_PREFIX, parse_dtype, parse_order, parse_v2_fill_value, transpose_for

METADATA_KEY = "meta"
ATTRIBUTES_KEY = "attrs"


def parse_metadata(raw: bytes | str, attributes: bytes | str | None = None) -> ArrayDescription:
    doc = load_json_object(raw, METADATA_KEY)
    attrs = {} if attributes is None else load_json_object(attributes, ATTRIBUTES_KEY)
    if doc.get("zarr_format") != 1:
        raise MetadataError("zarr_format", f"expected 1, got {doc.get('zarr_format')!r}")
    shape = parse_shape(require(doc, "shape"), "shape", allow_zero=True)
    chunk_shape = parse_chunk_shape(require(doc, "chunks"), "chunks", len(shape))
    data_type = parse_dtype(require(doc, "dtype"))
    check_sizes(shape, chunk_shape, data_type, "chunks")
    codecs = [
        *transpose_for(parse_order(require(doc, "order")), len(shape)),
        CodecSpec("bytes", {}, "dtype"),
        *_compressor(require(doc, "compression"), doc.get("compression_opts")),
    ]
    return ArrayDescription(
        shape=shape,
        data_type=data_type,
        chunk_shape=chunk_shape,
        chunk_key_encoding=ChunkKeyEncoding("v2", "."),
        fill_value=_fill_value(require(doc, "fill_value"), data_type),
        codecs=tuple(codecs),
        attributes=parse_attributes(attrs, ATTRIBUTES_KEY),
        zarr_format=1,
    )



def _fill_value(value: object, data_type: DataType) -> bytes:
    """As v2's forms; null (undefined by the spec) reads as zero bits, datetimes included."""
    return bytes(data_type.itemsize) if value is None else parse_v2_fill_value(value, data_type)


def _compressor(name: object, options: object) -> list[CodecSpec]:
    if name in (None, "none"):
        return []
    if name in ("zlib", "bz2"):
        level = 1 if options is None else options
        if not isinstance(level, int) or isinstance(level, bool) or not 0 <= level <= 9:
            raise MetadataError("compression_opts", f"expected a level from 0 to 9, got {options!r}")
        return [CodecSpec(BUFFER_CODEC_PREFIX + str(name), {"level": level}, "compression")]
    if name == "blosc":
        if not isinstance(options, Mapping):
            raise MetadataError("compression_opts", f"expected an object for blosc, got {options!r}")
        allowed = {"cname", "clevel", "shuffle"}
        if set(options) - allowed:
            raise MetadataError("compression_opts", f"unknown blosc options {sorted(set(options) - allowed)}")
        return [CodecSpec(BUFFER_CODEC_PREFIX + "blosc", dict(options), "compression")]
    raise MetadataError("compression", f"unknown compression {name!r} (none, zlib, bz2 or blosc)")
