"""Zarr v1 as a `Format`: arrays only (`meta`, attributes apart in `attrs`), no groups and so
no consolidated metadata; v2 groups held v1 arrays, as zarr-python 2 could read them.
Documents are written as v2's are. Array documents are read in `v1`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import MetadataError
from .description import ArrayDescription
from .format import ConsolidatedChange, Format, Get, NodeMetadata, join_path, mapping_or_empty
from .v1 import ATTRIBUTES_KEY, METADATA_KEY, parse_metadata
from .v2_format import dump


class V1Format(Format):
    def discover(self, get: Get, path: str, *, consolidated_first: bool) -> NodeMetadata | None:
        raw = get(join_path(path, METADATA_KEY))
        if raw is None:
            return None
        attrs = get(join_path(path, ATTRIBUTES_KEY))
        files = (METADATA_KEY, *((ATTRIBUTES_KEY,) if attrs is not None else ()))
        stored = {METADATA_KEY: raw, **({ATTRIBUTES_KEY: attrs} if attrs is not None else {})}
        return NodeMetadata(path, "array", self, files, {}, stored)

    def listed_node(self, path: str, documents: Mapping[str, Any]) -> NodeMetadata | None:
        return None  # (no v1 group consolidates)

    def attributes(self, documents: Mapping[str, Any]) -> Mapping[str, Any]:
        return mapping_or_empty(documents.get(ATTRIBUTES_KEY, {}))

    def describe(self, node: NodeMetadata) -> ArrayDescription:
        return parse_metadata(node.raw[METADATA_KEY], node.raw.get(ATTRIBUTES_KEY))

    def dump(self, doc: Any) -> bytes:
        return dump(doc)

    def with_attributes(self, stored: bytes | None, attributes: Mapping[str, Any]) -> bytes:
        """A new `attrs` (nothing else is in it)."""
        return self.dump(dict(attributes))

    def new_group_files(self) -> dict[str, bytes]:
        raise MetadataError("zarr_format", "Zarr v1 has no groups")

    def new_array_files(self, shape: Sequence[int], dtype: np.dtype[Any],
                        chunks: Sequence[int] | None, codec: str) -> dict[str, bytes]:
        # (A new array is made in a group, and v1 has none.)
        raise MetadataError("zarr_format", "Zarr v1 has no groups to make an array in")

    def edit_consolidated(self, stored: bytes, change: ConsolidatedChange) -> bytes | None:
        return None

    def list_attributes(self, files: dict[str, Any], attributes: Mapping[str, Any]) -> None:
        files[ATTRIBUTES_KEY] = dict(attributes)


FORMAT = V1Format(zarr_format=1, metadata_file=METADATA_KEY, attributes_file=ATTRIBUTES_KEY,
                  group_file=None, consolidated_file=None, child_formats=(),
                  listed_files=(), reserved_names=frozenset({METADATA_KEY, ATTRIBUTES_KEY}))
