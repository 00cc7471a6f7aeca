"""Node discovery: what sits at a store path (a group or an array, which format), and the
children of a group known from its consolidated metadata.

Consolidated metadata (v2 `.zmetadata`, v3 `consolidated_metadata` inline in a group's
`zarr.json`) holds the documents of every descendant, so a whole hierarchy is known from one
read. Without it, `children` finds a group's children (by listing, OME-Zarr metadata, name).
Each format finds its own nodes (`Format.discover`, `Format.listed_node`); this asks them in
the registry's order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from typing import Any

from .format import Get, NodeMetadata, join_path
from .registry import FORMATS

__all__ = ["ALL_FORMATS", "Get", "NodeMetadata", "child_formats", "consolidated_children", "discover",
           "join_path"]

ALL_FORMATS = tuple(FORMATS)


def discover(get: Get, path: str, formats: Collection[int] = ALL_FORMATS, *,
             consolidated_first: bool = True) -> NodeMetadata | None:
    """What is stored at `path`, or None when nothing Zarr is there. Reads as little as it can:
    one read for a v3 node, and for a v2 group with consolidated metadata one more. Only the
    Zarr versions in `formats` are looked for (a v3 group's children are v3: one read each).
    `consolidated_first`: v2 `.zmetadata` is looked for before `.zarray` (roots usually have
    one; children seldom: without, a v2 array costs two reads, a miss three)."""
    for number, found_in in FORMATS.items():
        if number in formats:
            node = found_in.discover(get, path, consolidated_first=consolidated_first)
            if node is not None:
                return node
    return None


def child_formats(parent: NodeMetadata) -> tuple[int, ...]:
    """The Zarr versions a group's children can have: its own (v1 has no groups; v2 groups
    held v1 arrays, as zarr-python 2 could read them)."""
    return parent.format.child_formats


def consolidated_children(node: NodeMetadata) -> dict[str, NodeMetadata] | None:
    """The children of a group known from its consolidated metadata, or None without it."""
    if node.consolidated is None:
        return None
    below: dict[str, dict[str, Mapping[str, Any]]] = {}  # child name -> its descendants
    for relative, documents in node.consolidated.items():
        name, _, rest = relative.partition("/")
        if rest:
            below.setdefault(name, {})[rest] = documents
    children: dict[str, NodeMetadata] = {}
    for name, documents in node.consolidated.items():
        if "/" in name:
            continue
        child = node.format.listed_node(join_path(node.path, name), documents)
        if child is not None:
            children[name] = dataclasses.replace(
                child, raw={}, consolidated=below.get(name, {}) if child.kind == "group" else None)
    return children
