"""Arrays whose elements have no fixed size: v3 `string` and `bytes` (and zarr-python 3.1's
`variable_length_bytes`) with the `vlen-utf8`/`vlen-bytes` codec, v2 `|O` with a `vlen-utf8`
or `vlen-bytes` filter. They have no flat view; their text view (`data.txt`) reads them.

Their description is an `ArrayDescription` of a stand-in data type (one byte) for the grid,
the keys, the names and attributes, and what is variable beside it: the kind, the fill value
and the codec chain (the vlen codec, then bytes->bytes codecs in v3 terms).
"""

from __future__ import annotations

import base64
import binascii
import copy
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import MetadataError
from . import v2, v3
from .description import CodecSpec, VariableDescription, require
from .format import NodeMetadata

_V3_KINDS = {"string": "string", "variable_length_utf8": "string",
             "bytes": "bytes", "variable_length_bytes": "bytes"}
VLEN_CODECS = {"vlen-utf8": "string", "vlen-bytes": "bytes"}


class NotVariableError(MetadataError):
    """The array's elements have a fixed size (or it is no array of strings or bytes)."""


def describe_variable(node: NodeMetadata) -> VariableDescription:
    """The description of an array of strings or bytes; MetadataError when it is not one."""
    name = node.files[0] if node.files else ""
    if name == v3.METADATA_KEY:
        return _from_v3(node.document(name))
    if name == v2.METADATA_KEY:
        attributes = node.document(v2.ATTRIBUTES_KEY) if v2.ATTRIBUTES_KEY in node.files else {}
        return _from_v2(node.document(name), attributes if isinstance(attributes, Mapping) else {})
    raise NotVariableError(name or "metadata", "no variable-size elements in this format")


def _from_v3(doc: Mapping[str, Any]) -> VariableDescription:
    data_type = doc.get("data_type")
    kind = _V3_KINDS.get(data_type) if isinstance(data_type, str) else None
    if kind is None:
        raise NotVariableError("data_type", f"{data_type!r} is not a variable-size type")
    stand_in = {**copy.deepcopy(dict(doc)), "data_type": "uint8", "fill_value": 0,
                "codecs": [{"name": "bytes"}]}
    codecs = v3.parse_codec_list(require(doc, "codecs"), "codecs")
    _check_chain(codecs, kind)
    return VariableDescription(v3.metadata_from_json(stand_in), kind,
                               _fill(doc.get("fill_value"), kind), codecs)


def _from_v2(doc: Mapping[str, Any], attributes: Mapping[str, Any]) -> VariableDescription:
    if doc.get("dtype") != "|O":
        raise NotVariableError("dtype", f"{doc.get('dtype')!r} is not a variable-size type")
    filters = doc.get("filters") or []
    first = filters[0] if isinstance(filters, list) and filters else {}
    kind = VLEN_CODECS.get(str(first.get("id"))) if isinstance(first, Mapping) else None
    if kind is None:
        raise NotVariableError("filters", f"objects need a vlen-utf8 or vlen-bytes filter: {filters!r}")
    stated = doc.get("fill_value") is not None  # (null: zarr-python's and xarray's reads do not mask)
    stand_in = {**copy.deepcopy(dict(doc)), "dtype": "|u1", "fill_value": 0 if stated else None,
                "filters": None, "compressor": None}
    rest = [v2.buffer_codec(f, f"filters[{i}]") for i, f in enumerate(filters) if i]
    compressor = doc.get("compressor")
    if compressor is not None:
        rest.append(v2.buffer_codec(compressor, "compressor"))
    codecs = (CodecSpec(str(first["id"]), {}, "filters[0]"), *rest)
    fill = _v2_fill(doc.get("fill_value"), kind)
    return VariableDescription(v2.metadata_from_json(stand_in, attributes), kind, fill, codecs,
                               v2.parse_order(doc.get("order")))


def _check_chain(codecs: tuple[CodecSpec, ...], kind: str) -> None:
    if VLEN_CODECS.get(codecs[0].name) != kind:
        raise MetadataError(f"{codecs[0].member}.name",
                            f"a {kind} array needs the vlen-{'utf8' if kind == 'string' else 'bytes'} "
                            f"codec first, got {codecs[0].name!r}")


def _v2_fill(value: object, kind: str) -> str | bytes:
    """v2's fill forms: those of v3, and numbers, as zarr-python 2 wrote and reads them."""
    if v2.numeric_text_fill(value):
        text = str(np.array(value).astype(str))
        return text if kind == "string" else text.encode()
    return _fill(value, kind)


def _fill(value: object, kind: str) -> str | bytes:
    """The fill value (null, as zarr-python reads it: empty)."""
    if value is None:
        return "" if kind == "string" else b""
    if kind == "string":
        if not isinstance(value, str):
            raise MetadataError("fill_value", f"expected a string, got {value!r}")
        return value
    if isinstance(value, list) and all(isinstance(b, int) and 0 <= b < 256 for b in value):
        return bytes(value)
    if not isinstance(value, str):
        raise MetadataError("fill_value", f"expected base64 text or a list of bytes, got {value!r}")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise MetadataError("fill_value", f"not valid base64: {value!r}") from None
