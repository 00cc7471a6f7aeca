"""Building and editing the metadata documents of groups and arrays as the formats write them:
a node's attributes, a new group, and the entries of a group's consolidated metadata.

Everything a document holds besides what is changed is kept as it was (member order too);
documents are written as the format's reference implementation writes them (`Format.dump`).
Consolidated metadata is edited as {node path relative to the group: {file name: document}}
(`ConsolidatedNodes`), whatever the format stores it as. What differs between formats is each
format's (`format.Format`); the functions here that take a format's number hand over to it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .description import load_json_object
from .format import ConsolidatedChange, ConsolidatedNodes
from .registry import FORMATS

__all__ = ["RESERVED_NAMES", "ConsolidatedNodes", "drop_subtree",
           "edit_consolidated", "new_group", "node_documents", "set_attributes",
           "valid_child_name", "with_attributes"]

# The names the formats give their own keys, and those of zarrfs's files in an array's directory.
RESERVED_NAMES = frozenset({"chunks", "data"}).union(*(f.reserved_names for f in FORMATS.values()))


def valid_child_name(name: str) -> bool:
    """Whether `name` may name a new group or array: not a format's key, not hidden, not a path."""
    return bool(name) and "/" not in name and not name.startswith((".", "__")) and name not in RESERVED_NAMES


def with_attributes(stored: bytes | None, zarr_format: int, attributes: Mapping[str, Any]) -> bytes:
    """The attributes file (`attributes_file`) holding `attributes` (`Format.with_attributes`)."""
    return FORMATS[zarr_format].with_attributes(stored, attributes)


def new_group(zarr_format: int) -> dict[str, bytes]:
    """The files of a new, empty group with no attributes."""
    return FORMATS[zarr_format].new_group_files()


def node_documents(files: Mapping[str, bytes]) -> dict[str, Any]:
    """A node's stored files as the documents consolidated metadata lists (JSON ones only)."""
    listed = {name for found in FORMATS.values() for name in found.listed_files}
    return {name: load_json_object(raw, name) for name, raw in files.items() if name in listed}


def edit_consolidated(stored: bytes, zarr_format: int, change: ConsolidatedChange) -> bytes | None:
    """A group's consolidated metadata document after `change` edited its nodes; None when the
    document has none or `change` left it alone (`Format.edit_consolidated`)."""
    return FORMATS[zarr_format].edit_consolidated(stored, change)


def drop_subtree(nodes: ConsolidatedNodes, relative: str) -> None:
    for path in [p for p in nodes if p == relative or p.startswith(relative + "/")]:
        del nodes[path]


def set_attributes(nodes: ConsolidatedNodes, relative: str, zarr_format: int,
                   attributes: Mapping[str, Any]) -> None:
    """A listed node's attributes (not listed: left unlisted)."""
    files = nodes.get(relative)
    if files is not None:
        FORMATS[zarr_format].list_attributes(files, attributes)
