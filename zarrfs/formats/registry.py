"""The Zarr formats by number, and what callers outside `formats` ask of a node's format
instead of branching on its number. A new format is one module declaring its `FORMAT` (and
what it parses), added to `FORMATS`."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol

from . import v1, v2, v3
from .format import Format

FORMATS: dict[int, Format] = {f.zarr_format: f for f in (v3.FORMAT, v2.FORMAT, v1.FORMAT)}


class Node(Protocol):
    """What these functions read of a node (a `nodes.NodeMetadata`)."""

    @property
    def path(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def zarr_format(self) -> int: ...
    @property
    def files(self) -> tuple[str, ...]: ...
    @property
    def documents(self) -> Mapping[str, Any]: ...
    @property
    def raw(self) -> Mapping[str, bytes]: ...
    @property
    def consolidated(self) -> Mapping[str, Mapping[str, Any]] | None: ...


def format_of(node: Node) -> Format:
    return FORMATS[node.zarr_format]


def consolidated_file(node: Node) -> str | None:
    """The stored file holding a group's consolidated metadata, or None when it has none
    (an array; a format without; a v3 group whose zarr.json lacks the member)."""
    found = format_of(node)
    name = found.consolidated_file
    if node.kind != "group" or name is None or name not in node.files:
        return None
    return None if found.consolidated_inline and node.consolidated is None else name


def misplaced(node: Node, group: Node) -> str | None:
    """Why `node` cannot be a child of `group` (formats that cannot be mixed), or None."""
    if node.zarr_format in format_of(group).child_formats:
        return None
    return f"a Zarr v{node.zarr_format} node cannot be in a v{group.zarr_format} group"


def xarray_fill_value(node: Node, attributes: Mapping[str, Any]) -> object:
    """The fill value stated in the document of a v2 array xarray wrote (its `_FillValue`,
    which xarray keeps as the array's `fill_value`; `attributes` are the array's), or None."""
    if node.zarr_format != 2 or "_ARRAY_DIMENSIONS" not in attributes:
        return None
    document = node.documents.get(v2.METADATA_KEY)
    if document is None and v2.METADATA_KEY in node.raw:
        document = json.loads(node.raw[v2.METADATA_KEY])
    return document.get("fill_value") if isinstance(document, Mapping) else None
