"""Node discovery: what sits at a store path (a group or an array, which format), and the
children of a group known from its consolidated metadata.

Consolidated metadata (v2 `.zmetadata`, v3 `consolidated_metadata` inline in a group's
`zarr.json`) holds the documents of every descendant, so a whole hierarchy is known from one
read. Without it, `children` finds a group's children (by listing, OME-Zarr metadata, name).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import MetadataError
from . import v1, v2, v3
from .description import ArrayDescription, load_json_object
from .registry import FORMATS

Get = Callable[[str], bytes | None]  # a store's get: bytes of a key, None when missing


@dataclass(frozen=True)
class NodeMetadata:
    """A group or array at `path` ("" for the root of the store, "a/b" below it)."""

    path: str
    kind: str  # "group" or "array"
    zarr_format: int
    files: tuple[str, ...]  # the metadata files stored for this node, as they are named
    documents: Mapping[str, Any]  # their parsed JSON, per file name (attributes files too)
    raw: Mapping[str, bytes] = field(default_factory=dict)  # their bytes, when they were read
    # Documents of every descendant by path relative to this node, when consolidated.
    consolidated: Mapping[str, Mapping[str, Any]] | None = None

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    @property
    def attributes(self) -> Mapping[str, Any]:
        if self.zarr_format == 3:
            attrs = self.documents.get(v3.METADATA_KEY, {}).get("attributes", {})
        else:
            attrs = self.documents.get(v2.ATTRIBUTES_KEY if self.zarr_format == 2 else v1.ATTRIBUTES_KEY, {})
        return attrs if isinstance(attrs, Mapping) else {}

    def describe(self) -> ArrayDescription:
        """The array's description; MetadataError when it cannot be read."""
        if self.kind != "array":
            raise MetadataError("node_type", f"{self.path or '/'} is a group, not an array")
        if self.zarr_format == 3:
            return v3.metadata_from_json(self._document(v3.METADATA_KEY))
        if self.zarr_format == 2:
            attributes = self._document(v2.ATTRIBUTES_KEY) if v2.ATTRIBUTES_KEY in self.files else {}
            if not isinstance(attributes, Mapping):
                raise MetadataError(v2.ATTRIBUTES_KEY, f"expected a JSON object, got {attributes!r}")
            return v2.metadata_from_json(self._document(v2.METADATA_KEY), attributes)
        return v1.parse_metadata(self.raw[v1.METADATA_KEY], self.raw.get(v1.ATTRIBUTES_KEY))

    def _document(self, name: str) -> Any:
        """A metadata file's JSON: known already, or parsed now (then bad JSON is reported
        here, when the array is opened, not when its group is listed)."""
        if name in self.documents:
            return self.documents[name]
        if name in self.raw:
            return load_json_object(self.raw[name], name)
        raise MetadataError(name, "missing")


def join_path(*parts: str) -> str:
    """Store path parts joined with '/', empty parts (the root) left out."""
    return "/".join(p for p in parts if p)


ALL_FORMATS = (3, 2, 1)


def discover(get: Get, path: str, formats: Collection[int] = ALL_FORMATS, *,
             consolidated_first: bool = True) -> NodeMetadata | None:
    """What is stored at `path`, or None when nothing Zarr is there. Reads as little as it can:
    one read for a v3 node, and for a v2 group with consolidated metadata one more. Only the
    Zarr versions in `formats` are looked for (a v3 group's children are v3: one read each).
    `consolidated_first`: v2 `.zmetadata` is looked for before `.zarray` (roots usually have
    one; children seldom: without, a v2 array costs two reads, a miss three)."""
    if 3 in formats:
        raw = get(join_path(path, v3.METADATA_KEY))
        if raw is not None:
            return _v3_node(path, raw)
    if 2 in formats:
        found = _discover_v2(get, path, consolidated_first)
        if found is not None:
            return found
    if 1 in formats:
        return _discover_v1(get, path)
    return None


def child_formats(parent: NodeMetadata) -> tuple[int, ...]:
    """The Zarr versions a group's children can have: its own (v1 has no groups; v2 groups
    held v1 arrays, as zarr-python 2 could read them)."""
    return FORMATS[parent.zarr_format].child_formats


def _discover_v2(get: Get, path: str, consolidated_first: bool) -> NodeMetadata | None:
    consolidated = get(join_path(path, v2.CONSOLIDATED_KEY)) if consolidated_first else None
    if consolidated is not None:
        node = _v2_consolidated_group(path, consolidated)
        if node is not None:
            return node
    for key, kind in ((v2.METADATA_KEY, "array"), (v2.GROUP_KEY, "group")):
        raw = get(join_path(path, key))
        if raw is None:
            continue
        if kind == "group" and not consolidated_first:
            consolidated = get(join_path(path, v2.CONSOLIDATED_KEY))
            node = None if consolidated is None else _v2_consolidated_group(path, consolidated)
            if node is not None:
                return node
        return _v2_node(get, path, kind, key, raw, consolidated)
    return None


def _discover_v1(get: Get, path: str) -> NodeMetadata | None:
    raw = get(join_path(path, v1.METADATA_KEY))
    if raw is not None:
        attrs = get(join_path(path, v1.ATTRIBUTES_KEY))
        files = (v1.METADATA_KEY, *((v1.ATTRIBUTES_KEY,) if attrs is not None else ()))
        stored = {v1.METADATA_KEY: raw, **({v1.ATTRIBUTES_KEY: attrs} if attrs is not None else {})}
        return NodeMetadata(path, "array", 1, files, {}, stored)
    return None


def _v3_node(path: str, raw: bytes) -> NodeMetadata:
    try:
        doc = load_json_object(raw, v3.METADATA_KEY)
    except MetadataError:  # shown as an array that cannot be opened, saying why
        return NodeMetadata(path, "array", 3, (v3.METADATA_KEY,), {}, {v3.METADATA_KEY: raw})
    kind = doc.get("node_type")
    if kind not in ("group", "array"):
        raise MetadataError("node_type", f"expected 'group' or 'array', got {kind!r}")
    return NodeMetadata(path, str(kind), 3, (v3.METADATA_KEY,), {v3.METADATA_KEY: doc},
                        {v3.METADATA_KEY: raw}, _v3_consolidated(doc))


def _v3_consolidated(doc: Mapping[str, Any]) -> Mapping[str, Mapping[str, Any]] | None:
    block = doc.get("consolidated_metadata")
    if not isinstance(block, Mapping) or not isinstance(block.get("metadata"), Mapping):
        return None
    return {str(k): {v3.METADATA_KEY: v} for k, v in block["metadata"].items()}


def _v2_node(
    get: Get, path: str, kind: str, key: str, raw: bytes, consolidated: bytes | None
) -> NodeMetadata:
    attrs_raw = get(join_path(path, v2.ATTRIBUTES_KEY))
    stored = {key: raw}
    files = [key]
    if attrs_raw is not None:
        stored[v2.ATTRIBUTES_KEY] = attrs_raw
        files.append(v2.ATTRIBUTES_KEY)
    documents: dict[str, Any] = {}
    for name, data in stored.items():  # bad JSON is reported when the node is opened
        with contextlib.suppress(MetadataError):
            documents[name] = load_json_object(data, name)
    if consolidated is not None:
        files.append(v2.CONSOLIDATED_KEY)
        stored[v2.CONSOLIDATED_KEY] = consolidated
    return NodeMetadata(path, kind, 2, tuple(files), documents, stored)


def _v2_consolidated_group(path: str, raw: bytes) -> NodeMetadata | None:
    """A v2 group from its `.zmetadata` alone (it holds the group's own `.zgroup` too)."""
    doc = load_json_object(raw, v2.CONSOLIDATED_KEY)
    entries = doc.get("metadata")
    if not isinstance(entries, Mapping) or v2.GROUP_KEY not in entries:
        return None
    own = {name: entries[name] for name in (v2.GROUP_KEY, v2.ATTRIBUTES_KEY) if name in entries}
    files = (*own, v2.CONSOLIDATED_KEY)
    return NodeMetadata(path, "group", 2, files, own, {v2.CONSOLIDATED_KEY: raw}, _by_node(entries))


def _by_node(entries: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """{"a/b/.zarray": doc, ...} -> {"a/b": {".zarray": doc, ...}} (the group itself left out)."""
    nodes: dict[str, dict[str, Any]] = {}
    for key, doc in entries.items():
        node_path, _, name = str(key).rpartition("/")
        if node_path:
            nodes.setdefault(node_path, {})[name] = doc
    return nodes


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
        child = _from_documents(join_path(node.path, name), documents, node.zarr_format)
        if child is not None:
            children[name] = NodeMetadata(child.path, child.kind, child.zarr_format, child.files,
                                          child.documents, {},
                                          below.get(name, {}) if child.kind == "group" else None)
    return children


def _from_documents(path: str, documents: Mapping[str, Any], zarr_format: int) -> NodeMetadata | None:
    if zarr_format == 3:
        doc = documents.get(v3.METADATA_KEY)
        kind = doc.get("node_type") if isinstance(doc, Mapping) else None
        if kind not in ("group", "array"):
            return None
        return NodeMetadata(path, str(kind), 3, (v3.METADATA_KEY,), dict(documents))
    for key, kind in ((v2.METADATA_KEY, "array"), (v2.GROUP_KEY, "group")):
        if key in documents:
            files = tuple(name for name in (key, v2.ATTRIBUTES_KEY) if name in documents)
            return NodeMetadata(path, kind, 2, files, dict(documents))
    return None
