"""Zarr v2 as a `Format`: `.zarray` or `.zgroup` per node with its attributes apart in
`.zattrs`, consolidated metadata apart in a group's `.zmetadata` (flat keys "a/b/.zarray",
the group's own documents among them), documents written as zarr-python writes them. Array
documents are read in `v2`."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import MetadataError
from .description import ArrayDescription, load_json_object
from .dtypes import DataType, fill_value_to_json
from .format import (
    ConsolidatedChange,
    ConsolidatedNodes,
    Format,
    Get,
    NodeMetadata,
    apply_change,
    join_path,
    mapping_or_empty,
)
from .layout import CodecChoice, new_layout
from .v2 import ATTRIBUTES_KEY, CONSOLIDATED_KEY, GROUP_KEY, METADATA_KEY, metadata_from_json

_KINDS = ((METADATA_KEY, "array"), (GROUP_KEY, "group"))


def dump(doc: Any) -> bytes:
    """Sorted, with 4 spaces, ASCII only, as zarr-python writes v2 (and v1) documents."""
    return json.dumps(doc, indent=4, sort_keys=True, ensure_ascii=True).encode()


class V2Format(Format):
    def discover(self, get: Get, path: str, *, consolidated_first: bool) -> NodeMetadata | None:
        """Reads as little as it can: without consolidated metadata, an array costs two reads
        and a miss three (`consolidated_first` adds one, saved at roots, which usually have it)."""
        consolidated = get(join_path(path, CONSOLIDATED_KEY)) if consolidated_first else None
        if consolidated is not None:
            node = self._consolidated_group(path, consolidated)
            if node is not None:
                return node
        for key, kind in _KINDS:
            raw = get(join_path(path, key))
            if raw is None:
                continue
            if kind == "group" and not consolidated_first:
                consolidated = get(join_path(path, CONSOLIDATED_KEY))
                node = None if consolidated is None else self._consolidated_group(path, consolidated)
                if node is not None:
                    return node
            return self._node(get, path, kind, key, raw, consolidated)
        return None

    def _node(self, get: Get, path: str, kind: str, key: str, raw: bytes,
              consolidated: bytes | None) -> NodeMetadata:
        attrs_raw = get(join_path(path, ATTRIBUTES_KEY))
        stored = {key: raw}
        files = [key]
        if attrs_raw is not None:
            stored[ATTRIBUTES_KEY] = attrs_raw
            files.append(ATTRIBUTES_KEY)
        documents: dict[str, Any] = {}
        for name, data in stored.items():  # bad JSON is reported when the node is opened
            with contextlib.suppress(MetadataError):
                documents[name] = load_json_object(data, name)
        if consolidated is not None:
            files.append(CONSOLIDATED_KEY)
            stored[CONSOLIDATED_KEY] = consolidated
        return NodeMetadata(path, kind, self, tuple(files), documents, stored)

    def _consolidated_group(self, path: str, raw: bytes) -> NodeMetadata | None:
        """A group from its `.zmetadata` alone (it holds the group's own `.zgroup` too)."""
        doc = load_json_object(raw, CONSOLIDATED_KEY)
        entries = doc.get("metadata")
        if not isinstance(entries, Mapping) or GROUP_KEY not in entries:
            return None
        own = {name: entries[name] for name in (GROUP_KEY, ATTRIBUTES_KEY) if name in entries}
        files = (*own, CONSOLIDATED_KEY)
        below = {relative: documents for relative, documents in _by_node(entries).items() if relative}
        return NodeMetadata(path, "group", self, files, own, {CONSOLIDATED_KEY: raw}, below)

    def listed_node(self, path: str, documents: Mapping[str, Any]) -> NodeMetadata | None:
        for key, kind in _KINDS:
            if key in documents:
                files = tuple(name for name in (key, ATTRIBUTES_KEY) if name in documents)
                return NodeMetadata(path, kind, self, files, dict(documents))
        return None

    def attributes(self, documents: Mapping[str, Any]) -> Mapping[str, Any]:
        return mapping_or_empty(documents.get(ATTRIBUTES_KEY, {}))

    def describe(self, node: NodeMetadata) -> ArrayDescription:
        attributes = node.document(ATTRIBUTES_KEY) if ATTRIBUTES_KEY in node.files else {}
        return metadata_from_json(node.document(METADATA_KEY), attributes)

    def xarray_fill_value(self, node: NodeMetadata, attributes: Mapping[str, Any]) -> object:
        """xarray keeps a v2 array's `_FillValue` as its `fill_value` (`attributes`: the
        array's; `_ARRAY_DIMENSIONS` among them says xarray wrote it)."""
        if "_ARRAY_DIMENSIONS" not in attributes:
            return None
        try:
            document = node.document(METADATA_KEY)
        except MetadataError:  # (not JSON: the array does not open, and says why)
            return None
        return document.get("fill_value")

    def dump(self, doc: Any) -> bytes:
        return dump(doc)

    def with_attributes(self, stored: bytes | None, attributes: Mapping[str, Any]) -> bytes:
        """A new `.zattrs` (nothing else is in it)."""
        return self.dump(dict(attributes))

    def new_group_files(self) -> dict[str, bytes]:
        return {GROUP_KEY: self.dump({"zarr_format": 2})}

    def new_array_files(self, shape: Sequence[int], dtype: np.dtype[Any],
                        chunks: Sequence[int] | None, codec: str) -> dict[str, bytes]:
        data_type = _new_data_type(dtype)
        chunk_shape, choice = new_layout(shape, data_type.itemsize, chunks, codec)
        fill = fill_value_to_json(bytes(data_type.itemsize), data_type)
        doc = {"zarr_format": 2, "shape": list(shape), "chunks": list(chunk_shape),
               "dtype": data_type.name, "compressor": _compressor(choice, data_type.itemsize),
               "fill_value": fill, "order": "C", "filters": None, "dimension_separator": "."}
        return {METADATA_KEY: self.dump(doc), ATTRIBUTES_KEY: self.dump({})}

    def edit_consolidated(self, stored: bytes, change: ConsolidatedChange) -> bytes | None:
        doc = load_json_object(stored, CONSOLIDATED_KEY)
        entries = doc.get("metadata")
        if not isinstance(entries, dict):
            return None
        nodes = _by_node(entries)
        if not apply_change(nodes, change):
            return None
        doc["metadata"] = {f"{path}/{name}" if path else name: document
                           for path, files in nodes.items() for name, document in files.items()}
        return self.dump(doc)

    def list_attributes(self, files: dict[str, Any], attributes: Mapping[str, Any]) -> None:
        files[ATTRIBUTES_KEY] = dict(attributes)


FORMAT = V2Format(zarr_format=2, metadata_file=METADATA_KEY, attributes_file=ATTRIBUTES_KEY,
                  group_file=GROUP_KEY, consolidated_file=CONSOLIDATED_KEY, child_formats=(2, 1),
                  listed_files=(METADATA_KEY, GROUP_KEY, ATTRIBUTES_KEY),
                  reserved_names=frozenset({METADATA_KEY, GROUP_KEY, ATTRIBUTES_KEY, CONSOLIDATED_KEY}))


def _by_node(entries: Mapping[str, Any]) -> ConsolidatedNodes:
    """{"a/b/.zarray": doc, ...} -> {"a/b": {".zarray": doc, ...}} (the group itself: "")."""
    nodes: ConsolidatedNodes = {}
    for key, document in entries.items():
        path, _, name = str(key).rpartition("/")
        nodes.setdefault(path, {})[name] = document
    return nodes


def _new_data_type(dtype: np.dtype[Any]) -> DataType:
    if dtype.fields is None and dtype.subdtype is None and dtype.kind in "biufcMm":
        little = dtype.newbyteorder("<") if dtype.itemsize > 1 else dtype
        return DataType.from_numpy(little.str, dtype.newbyteorder("="), stored=True)
    raise MetadataError("dtype", f"{dtype.str} cannot be stored in a Zarr v2 array")


def _compressor(codec: CodecChoice, itemsize: int) -> dict[str, Any] | None:
    if codec.name in ("zstd", "gzip"):
        return {"id": codec.name, "level": codec.level}
    if codec.name == "blosc":
        return {"id": "blosc", "cname": codec.cname, "clevel": codec.level,
                "shuffle": 2 if codec.shuffles_bits(itemsize) else 1, "blocksize": 0}
    return None

