"""An array's metadata in its store, kept above the array layer (which never reads or writes
a metadata document): opening an array (its node found and described), creating one (its v3
document written), and storing a new shape on a resize, in the array's own document
(`DocumentWriter`, the `metadata_writer` every array opened here gets) and in the
consolidated metadata of the groups above that list it (`resized_listing`, the one change both
the mount's node tree and the offline `zarrfs resize` apply)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from .array import VariableArray, ZarrArray
from .codecs import ChunkSpec, Pipeline
from .errors import MetadataError
from .formats import ArrayDescription, NodeMetadata, discover
from .formats.documents import ConsolidatedNodes, edit_consolidated
from .formats.edit import resize_listed, resized_document
from .formats.registry import FORMATS
from .formats.variable import describe_variable
from .grid import Index
from .store import Store

NEW_FORMAT = FORMATS[3]  # the format `create_array` writes

# A change to a group's consolidated metadata: (its nodes, the array's path relative to it).
ListingChange = Callable[[ConsolidatedNodes, str], None]


def open_array(store: Store, path: str = "", **options: Any) -> ZarrArray:
    """The array at `path` in `store`, whatever its format (MetadataError: none there).
    `options` are ZarrArray's (cache_bytes, threads, shared)."""
    node = discover(store.get, path)
    if node is None:
        raise MetadataError(NEW_FORMAT.metadata_file,
                            f"not found in {store.path(path)!r} (nor .zarray or meta)")
    return array_of(store, node, **options)


def array_of(store: Store, node: NodeMetadata, **options: Any) -> ZarrArray:
    """The array `node` describes (MetadataError: it is not one zarrfs can open), resizable
    through its own document. Opened from consolidated metadata, its document is not read
    yet: a resize reads it."""
    array_store = store.child(node.path)
    raw = node.raw.get(node.files[0], b"")
    return ZarrArray(array_store, node.describe(), raw,
                     metadata_writer=DocumentWriter(array_store, node.zarr_format), **options)


def variable_array_of(store: Store, node: NodeMetadata) -> VariableArray:
    """The array of strings or bytes `node` describes (NotVariableError: its elements have a
    fixed size; MetadataError: it cannot be read)."""
    return VariableArray(store.child(node.path), describe_variable(node))


def create_array(store: Store, description: ArrayDescription, **options: Any) -> ZarrArray:
    """A new Zarr v3 array at the root of `store`: its document written (nothing is when its
    codecs cannot be built), then opened."""
    raw = write_new_document(store, description)
    return ZarrArray(store, description, raw,
                     metadata_writer=DocumentWriter(store, NEW_FORMAT.zarr_format), **options)


def write_new_document(store: Store, description: ArrayDescription) -> bytes:
    """Store the v3 document of a new array at the root of `store`; the bytes stored."""
    Pipeline.build(description.codecs, ChunkSpec(description.chunk_shape, description.data_type,
                                                 description.fill_value))  # refuse before writing
    raw = json.dumps(description.to_json(), indent=2).encode() + b"\n"
    store.put(NEW_FORMAT.metadata_file, raw)
    return raw


class DocumentWriter:
    """Rewrites an array's own metadata document in its store with a new shape (an
    `zarrfs.array.writes.MetadataWriter`); everything else in the document is kept."""

    def __init__(self, store: Store, zarr_format: int) -> None:
        self.store = store
        self.zarr_format = zarr_format
        self.key = FORMATS[zarr_format].metadata_file

    def __call__(self, current: bytes, shape: Index) -> bytes:
        stored = current or self.store.get(self.key) or b""  # (opened from consolidated metadata)
        raw = resized_document(stored, self.zarr_format, shape)
        self.store.put(self.key, raw)
        return raw


def resized_listing(array_format: int, shape: Sequence[int]) -> ListingChange:
    """The change that gives the array (of format `array_format`) its new shape where a
    group's consolidated metadata lists it (not listed: nothing changes)."""
    return lambda nodes, relative: resize_listed(nodes, relative, array_format, shape)


def resized_in_listing(group: NodeMetadata, stored: bytes, relative: str, array_format: int,
                       shape: Sequence[int]) -> bytes | None:
    """`group`'s consolidated metadata document `stored` with the array at `relative` below it
    resized; None when it does not list the array."""
    change = resized_listing(array_format, shape)
    return edit_consolidated(stored, group.zarr_format, lambda nodes: change(nodes, relative))
