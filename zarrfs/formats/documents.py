"""Building and editing the metadata documents of groups and arrays as the formats write them:
a node's attributes, a new group, and the entries of a group's consolidated metadata.

Everything a document holds besides what is changed is kept as it was (member order too);
documents are written as zarr-python writes them (`dump`). Consolidated metadata is edited as
{node path relative to the group: {file name: document}} (`ConsolidatedNodes`), whatever the
format stores it as (v2: flat `.zmetadata` keys "a/b/.zarray"; v3: `consolidated_metadata`
inline in the group's zarr.json, keyed "a/b").
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import MetadataError
from . import v1, v2, v3
from .description import load_json_object
from .registry import FORMATS

ConsolidatedNodes = dict[str, dict[str, Any]]
# The names the formats give their own keys: never a child's name.
RESERVED_NAMES = frozenset({v3.METADATA_KEY, v2.METADATA_KEY, v2.GROUP_KEY, v2.ATTRIBUTES_KEY,
                            v2.CONSOLIDATED_KEY, v1.METADATA_KEY, v1.ATTRIBUTES_KEY, "c", "chunks", "data"})
CONSOLIDATED_FILES = {number: f.consolidated_file for number, f in FORMATS.items() if f.consolidated_file}


def valid_child_name(name: str) -> bool:
    """Whether `name` may name a new group or array: not a format's key, not hidden, not a path."""
    return bool(name) and "/" not in name and not name.startswith((".", "__")) and name not in RESERVED_NAMES


def attributes_file(zarr_format: int) -> str:
    """The file that holds a node's attributes (v3: its zarr.json)."""
    return FORMATS[zarr_format].attributes_file


def with_attributes(stored: bytes | None, zarr_format: int, attributes: Mapping[str, Any]) -> bytes:
    """The attributes file (`attributes_file`) holding `attributes`: v3 its zarr.json with only
    the `attributes` member replaced; v2 and v1 a new attributes document."""
    if zarr_format != 3:
        return dump(dict(attributes), zarr_format)
    if stored is None:
        raise MetadataError(v3.METADATA_KEY, "missing")
    doc = load_json_object(stored, v3.METADATA_KEY)
    doc["attributes"] = dict(attributes)
    return dump(doc, 3)


def new_group(zarr_format: int) -> dict[str, bytes]:
    """The files of a new, empty group with no attributes."""
    if zarr_format == 3:
        return {v3.METADATA_KEY: dump({"attributes": {}, "zarr_format": 3, "node_type": "group"}, 3)}
    if zarr_format == 2:
        return {v2.GROUP_KEY: dump({"zarr_format": 2}, 2)}
    raise MetadataError("zarr_format", "Zarr v1 has no groups")


def node_documents(files: Mapping[str, bytes]) -> dict[str, Any]:
    """A node's stored files as the documents consolidated metadata lists (JSON ones only)."""
    found = {}
    for name, raw in files.items():
        if name in (v3.METADATA_KEY, v2.METADATA_KEY, v2.GROUP_KEY, v2.ATTRIBUTES_KEY):
            found[name] = load_json_object(raw, name)
    return found


def edit_consolidated(stored: bytes, zarr_format: int,
                      change: Callable[[ConsolidatedNodes], None]) -> bytes | None:
    """A group's consolidated metadata document after `change` edited its nodes (for v2 the
    group itself is the node ""); None when the document has no consolidated metadata."""
    doc = load_json_object(stored, CONSOLIDATED_FILES[zarr_format])
    if zarr_format == 2:
        entries = doc.get("metadata")
        if not isinstance(entries, dict):
            return None
        nodes = _v2_nodes(entries)
        if not _changed(nodes, change):
            return None
        doc["metadata"] = {_v2_key(path, name): document
                           for path, files in nodes.items() for name, document in files.items()}
        return dump(doc, 2)
    block = doc.get("consolidated_metadata")
    if not isinstance(block, dict) or not isinstance(block.get("metadata"), dict):
        return None
    nodes = {path: {v3.METADATA_KEY: document} for path, document in block["metadata"].items()}
    if not _changed(nodes, change):
        return None
    block["metadata"] = {path: files[v3.METADATA_KEY] for path, files in nodes.items()
                         if v3.METADATA_KEY in files}
    return dump(doc, 3)


def _changed(nodes: ConsolidatedNodes, change: Callable[[ConsolidatedNodes], None]) -> bool:
    before = json.dumps(nodes, sort_keys=True)
    change(nodes)
    return json.dumps(nodes, sort_keys=True) != before


def drop_subtree(nodes: ConsolidatedNodes, relative: str) -> None:
    for path in [p for p in nodes if p == relative or p.startswith(relative + "/")]:
        del nodes[path]


def move_subtree(nodes: ConsolidatedNodes, old: str, new: str) -> None:
    for path in [p for p in nodes if p == old or p.startswith(old + "/")]:
        nodes[new + path[len(old):]] = nodes.pop(path)


def set_attributes(nodes: ConsolidatedNodes, relative: str, zarr_format: int,
                   attributes: Mapping[str, Any]) -> None:
    """A listed node's attributes (not listed: left unlisted)."""
    files = nodes.get(relative)
    if files is None:
        return
    if zarr_format == 3:
        files[v3.METADATA_KEY] = {**files[v3.METADATA_KEY], "attributes": dict(attributes)}
    else:
        files[v2.ATTRIBUTES_KEY] = dict(attributes)


def _v2_nodes(entries: Mapping[str, Any]) -> ConsolidatedNodes:
    nodes: ConsolidatedNodes = {}
    for key, document in entries.items():
        path, _, name = str(key).rpartition("/")
        nodes.setdefault(path, {})[name] = document
    return nodes


def _v2_key(path: str, name: str) -> str:
    return f"{path}/{name}" if path else name


def dump(doc: Any, zarr_format: int) -> bytes:
    """As zarr-python writes metadata: v3 in order with 2 spaces, v2 (and v1) sorted with 4."""
    if zarr_format == 3:
        return json.dumps(doc, indent=2).encode()
    return json.dumps(doc, indent=4, sort_keys=True, ensure_ascii=True).encode()
