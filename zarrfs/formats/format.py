"""What one Zarr format is to the rest of zarrfs: the interface each format implements
(`Format`: the names of its files, how its nodes are found and described, the documents it
writes and how it edits them), and the node it finds (`NodeMetadata`). Each format's module
(`v3_format`, `v2_format`, `v1_format`) implements it; `registry` holds them by number."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import MetadataError
from .description import ArrayDescription, load_json_object

Get = Callable[[str], bytes | None]  # a store's get: bytes of a key, None when missing
# Consolidated metadata as it is edited, whatever the format stores it as:
# {node path relative to the group: {file name: document}}.
ConsolidatedNodes = dict[str, dict[str, Any]]
ConsolidatedChange = Callable[[ConsolidatedNodes], None]  # edits the nodes in place


@dataclass(frozen=True, repr=False)
class Format(ABC):
    zarr_format: int
    metadata_file: str  # an array's metadata document
    attributes_file: str  # where a node's attributes are kept
    group_file: str | None  # a group's document (None: the format has no groups)
    consolidated_file: str | None  # where a group keeps consolidated metadata (None: never)
    child_formats: tuple[int, ...]  # the formats of the nodes its groups can hold
    listed_files: tuple[str, ...]  # a node's files that consolidated metadata lists
    reserved_names: frozenset[str]  # names it gives its own keys: never a child's name

    def __repr__(self) -> str:
        return f"<Zarr v{self.zarr_format}>"

    # -- finding and reading nodes -----------------------------------------------------------

    @abstractmethod
    def discover(self, get: Get, path: str, *, consolidated_first: bool) -> NodeMetadata | None:
        """The node of this format stored at `path`, or None. `consolidated_first`: look for
        consolidated metadata before the node's own document (for a format that keeps it apart)."""

    @abstractmethod
    def listed_node(self, path: str, documents: Mapping[str, Any]) -> NodeMetadata | None:
        """A node known only from the documents a group's consolidated metadata lists for it
        (None: they do not make a node)."""

    @abstractmethod
    def attributes(self, documents: Mapping[str, Any]) -> Mapping[str, Any]:
        """A node's attributes, from its parsed documents ({} when there are none)."""

    @abstractmethod
    def describe(self, node: NodeMetadata) -> ArrayDescription:
        """An array's description; MetadataError when its documents do not make one."""

    def xarray_fill_value(self, node: NodeMetadata, attributes: Mapping[str, Any]) -> object:
        """The fill value xarray keeps in the array's document instead of in its attributes
        (`_FillValue`), when the format has such a habit; else None."""
        return None

    def holds(self, child_format: int) -> bool:
        """Whether this format's groups can hold a node of `child_format`."""
        return child_format in self.child_formats

    # -- writing documents ---------------------------------------------------------------------

    @abstractmethod
    def dump(self, doc: Any) -> bytes:
        """A document as the format's reference implementation writes it."""

    @abstractmethod
    def with_attributes(self, stored: bytes | None, attributes: Mapping[str, Any]) -> bytes:
        """The attributes file (`attributes_file`, stored: its bytes or None) holding `attributes`."""

    @abstractmethod
    def new_group_files(self) -> dict[str, bytes]:
        """The files of a new, empty group (MetadataError when the format has no groups)."""

    @abstractmethod
    def new_array_files(self, shape: Sequence[int], dtype: np.dtype[Any],
                        chunks: Sequence[int] | None, codec: str) -> dict[str, bytes]:
        """The files of a new array of `dtype` filled with zeros (`layout.new_layout` says
        what `chunks` and `codec` mean); MetadataError when the format cannot hold it."""

    def resized_document(self, raw: bytes, shape: Sequence[int]) -> bytes:
        """An array's metadata document with a new shape (all else kept)."""
        doc = load_json_object(raw, self.metadata_file)
        doc["shape"] = list(shape)
        return self.dump(doc)

    # -- consolidated metadata ---------------------------------------------------------------

    @abstractmethod
    def edit_consolidated(self, stored: bytes, change: ConsolidatedChange) -> bytes | None:
        """The group's consolidated metadata file after `change` edited its nodes (the group
        itself is the node "" when the format lists it); None when it has none or is unchanged."""

    @abstractmethod
    def list_attributes(self, files: dict[str, Any], attributes: Mapping[str, Any]) -> None:
        """Give a node listed in consolidated metadata (its documents: `files`) `attributes`."""

    def resize_listed(self, files: dict[str, Any], shape: Sequence[int]) -> None:
        """Give an array listed in consolidated metadata (its documents: `files`) a new shape."""
        if isinstance(files.get(self.metadata_file), dict):
            files[self.metadata_file] = {**files[self.metadata_file], "shape": list(shape)}

    # -- what the rest of zarrfs asks of a format's file names ---------------------------------

    @property
    def attributes_in_metadata(self) -> bool:
        """Attributes are a member of the metadata document (rewriting them rewrites it)."""
        return self.attributes_file == self.metadata_file

    @property
    def consolidated_apart(self) -> str | None:
        """The consolidated metadata's own document, when it is not the group's."""
        return None if self.consolidated_inline else self.consolidated_file

    @property
    def consolidated_inline(self) -> bool:
        """Consolidated metadata is a member of the group's own document, which may lack it."""
        return self.consolidated_file is not None and self.consolidated_file == self.group_file


@dataclass(frozen=True)
class NodeMetadata:
    """A group or array at `path` ("" for the root of the store, "a/b" below it)."""

    path: str
    kind: str  # "group" or "array"
    format: Format
    files: tuple[str, ...]  # the metadata files stored for this node, as they are named
    documents: Mapping[str, Any]  # their parsed JSON, per file name (attributes files too)
    raw: Mapping[str, bytes] = field(default_factory=dict)  # their bytes, when they were read
    # Documents of every descendant by path relative to this node, when consolidated.
    consolidated: Mapping[str, Mapping[str, Any]] | None = None

    @property
    def zarr_format(self) -> int:
        return self.format.zarr_format

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    @property
    def attributes(self) -> Mapping[str, Any]:
        return self.format.attributes(self.documents)

    def describe(self) -> ArrayDescription:
        """The array's description; MetadataError when it cannot be read."""
        if self.kind != "array":
            raise MetadataError("node_type", f"{self.path or '/'} is a group, not an array")
        return self.format.describe(self)

    def document(self, name: str) -> Any:
        """A metadata file's JSON: known already, or parsed now (then bad JSON is reported
        here, when the array is opened, not when its group is listed)."""
        if name in self.documents:
            # (Consolidated metadata may list anything for a node's file, not only an object.)
            if not isinstance(self.documents[name], Mapping):
                raise MetadataError(name, f"expected a JSON object, got {self.documents[name]!r}")
            return self.documents[name]
        if name in self.raw:
            return load_json_object(self.raw[name], name)
        raise MetadataError(name, "missing")


def join_path(*parts: str) -> str:
    """Store path parts joined with '/', empty parts (the root) left out."""
    return "/".join(p for p in parts if p)


def mapping_or_empty(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def apply_change(nodes: ConsolidatedNodes, change: ConsolidatedChange) -> bool:
    """Apply `change` to `nodes`; whether it changed anything."""
    before = json.dumps(nodes, sort_keys=True)
    change(nodes)
    return json.dumps(nodes, sort_keys=True) != before
