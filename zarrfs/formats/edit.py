"""Changing stored metadata: an array's shape (resizing), in its own document and where the
consolidated metadata of a group lists it. Everything else in the documents is kept.
Each format does it (`format.Format`); these hand over to the one with the given number."""

from __future__ import annotations

from collections.abc import Sequence

from .documents import ConsolidatedNodes
from .registry import FORMATS


def resized_document(raw: bytes, zarr_format: int, shape: Sequence[int]) -> bytes:
    """The array's metadata document (zarr.json, .zarray or meta) with a new shape."""
    return FORMATS[zarr_format].resized_document(raw, shape)


def resize_listed(nodes: ConsolidatedNodes, relative: str, zarr_format: int, shape: Sequence[int]) -> None:
    """The change (`documents.edit_consolidated`) that gives a listed array a new shape."""
    FORMATS[zarr_format].resize_listed(nodes.get(relative, {}), shape)
