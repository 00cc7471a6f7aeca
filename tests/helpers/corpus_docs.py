"""The Zarr v3 documents the bad-input corpus (make_corpus.py) is made of: a valid array's
zarr.json (`base_doc`) and the pieces its cases change."""

from __future__ import annotations

import json
from typing import Any

Doc = dict[str, Any]


def base_doc(**changes: Any) -> Doc:
    doc: Doc = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": [8, 8],
        "data_type": "int32",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4, 4]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0,
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
        "attributes": {},
    }
    doc.update(changes)
    return doc


def without(member: str) -> Doc:
    doc = base_doc()
    del doc[member]
    return doc


def grid(chunk_shape: Any) -> Doc:
    return {"name": "regular", "configuration": {"chunk_shape": chunk_shape}}


BYTES: Doc = {"name": "bytes", "configuration": {"endian": "little"}}
CRC32C: Doc = {"name": "crc32c"}


def sharding(
    inner: Any = (4, 4), codecs: Any = None, index_codecs: Any = None, **extra: Any
) -> Doc:
    config: Doc = {
        "chunk_shape": list(inner) if isinstance(inner, tuple) else inner,
        "codecs": [BYTES] if codecs is None else codecs,
        "index_codecs": [BYTES, CRC32C] if index_codecs is None else index_codecs,
    }
    config.update(extra)
    return {"name": "sharding_indexed", "configuration": config}


# name -> (zarr.json bytes, expected member or None when valid)
MetadataCase = tuple[bytes, str | None]


def dumps(doc: Any) -> bytes:
    return (json.dumps(doc, indent=2) + "\n").encode()

