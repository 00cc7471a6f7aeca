"""Changing stored metadata: an array's shape (resizing), in its own document and in the
consolidated metadata of the groups above it. Everything else in the documents is kept."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import v1, v2, v3
from .description import load_json_object
from .documents import ConsolidatedNodes, dump

METADATA_KEYS = {3: v3.METADATA_KEY, 2: v2.METADATA_KEY, 1: v1.METADATA_KEY}


def resized_document(raw: bytes, zarr_format: int, shape: Sequence[int]) -> bytes:
    """The array's metadata document (zarr.json, .zarray or meta) with a new shape."""
    doc = load_json_object(raw, METADATA_KEYS[zarr_format])
    doc["shape"] = list(shape)
    return _dump(doc, zarr_format)


def resized_consolidated(raw: bytes, zarr_format: int, relative: str, shape: Sequence[int]) -> bytes | None:
    """A group's consolidated metadata (v2 `.zmetadata`, v3 zarr.json) with the array at
    `relative` resized, or None when it does not list that array."""
    doc = load_json_object(raw, v2.CONSOLIDATED_KEY if zarr_format == 2 else v3.METADATA_KEY)
    if zarr_format == 2:
        entries = doc.get("metadata")
        key = f"{relative}/{v2.METADATA_KEY}"
    else:
        block = doc.get("consolidated_metadata")
        entries = block.get("metadata") if isinstance(block, dict) else None
        key = relative
    if not isinstance(entries, dict) or not isinstance(entries.get(key), dict):
        return None
    entries[key]["shape"] = list(shape)
    return _dump(doc, zarr_format)


def resize_listed(nodes: ConsolidatedNodes, relative: str, zarr_format: int, shape: Sequence[int]) -> None:
    """The change (`documents.edit_consolidated`) that gives a listed array a new shape."""
    files = nodes.get(relative, {})
    key = METADATA_KEYS[zarr_format]
    if isinstance(files.get(key), dict):
        files[key] = {**files[key], "shape": list(shape)}


def _dump(doc: Any, zarr_format: int) -> bytes:
    return dump(doc, zarr_format)
