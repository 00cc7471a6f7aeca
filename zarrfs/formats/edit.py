"""Changing stored metadata: an array's shape (resizing), in its own document and in the
consolidated metadata of the groups above it. Everything else in the documents is kept.
Each format does it (`format.Format`); these hand over to the one with the given number."""

from __future__ import annotations

from collections.abc import Sequence

from .documents import ConsolidatedNodes
from .registry import FORMATS

METADATA_KEYS = {number: f.metadata_file for number, f in FORMATS.items()}


def resized_document(raw: bytes, zarr_format: int, shape: Sequence[int]) -> bytes:
    """The array's metadata document (zarr.json, .zarray or meta) with a new shape."""
    return FORMATS[zarr_format].resized_document(raw, shape)


def resized_consolidated(raw: bytes, zarr_format: int, relative: str, shape: Sequence[int]) -> bytes | None:
    """A group's consolidated metadata (v2 `.zmetadata`, v3 zarr.json) with the array at
    `relative` resized, or None when it does not list that array."""
    return FORMATS[zarr_format].resized_consolidated(raw, relative, shape)


def resize_listed(nodes: ConsolidatedNodes, relative: str, zarr_format: int, shape: Sequence[int]) -> None:
    """The change (`documents.edit_consolidated`) that gives a listed array a new shape."""
    FORMATS[zarr_format].resize_listed(nodes.get(relative, {}), shape)
