"""The format registry: every registered format implements `formats.format.Format` whole, and
the generic functions (discovery, node documents, consolidated edits, new groups and arrays,
resizing) reach a format only through the registry -- a toy format put in `FORMATS` for one
test is found, read and written by them like the real ones."""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest

from zarrfs.errors import MetadataError
from zarrfs.formats import (
    ArrayDescription,
    ChunkKeyEncoding,
    CodecSpec,
    consolidated_children,
    creation,
    discover,
    documents,
    edit,
    registry,
)
from zarrfs.formats.dtypes import CORE_TYPES
from zarrfs.formats.format import ConsolidatedChange, Format, Get, NodeMetadata, apply_change, join_path

pytestmark = pytest.mark.fast

GROUP_FORMATS = [f for f in registry.FORMATS.values() if f.group_file is not None]


def test_every_registered_format_implements_the_whole_interface() -> None:
    assert set(registry.FORMATS) == {1, 2, 3}
    abstract = {name for name, value in vars(Format).items() if getattr(value, "__isabstractmethod__", False)}
    assert {"discover", "describe", "edit_consolidated", "new_array_files"} <= abstract
    for number, found in registry.FORMATS.items():
        assert isinstance(found, Format) and found.zarr_format == number
        assert not inspect.isabstract(type(found))
        assert all(getattr(type(found), name) is not getattr(Format, name) for name in abstract)
        names = {found.metadata_file, found.attributes_file, found.group_file, found.consolidated_file}
        assert names - {None} <= found.reserved_names <= documents.RESERVED_NAMES
        assert set(found.listed_files) <= found.reserved_names
        assert set(found.child_formats) <= set(registry.FORMATS)


@pytest.mark.parametrize("kept_in", GROUP_FORMATS, ids=repr)
def test_each_format_writes_what_it_reads(kept_in: Format) -> None:
    """A new group, its attributes, a new array and its resizing, through the generic
    functions and back through discovery, for each format that has groups."""
    number = kept_in.zarr_format
    store: dict[str, bytes] = {}
    put(store, "", documents.new_group(number))
    group = discover(store.get, "", (number,))
    assert group is not None and group.kind == "group" and group.format is kept_in
    assert group.attributes == {}

    name = kept_in.attributes_file
    put(store, "", {name: documents.with_attributes(store.get(name), number, {"a": [1, "é"]})})
    group = discover(store.get, "", (number,))
    assert group is not None and dict(group.attributes) == {"a": [1, "é"]}

    put(store, "x", creation.new_array_files(number, (6, 4), np.dtype(">u2"), (3, 4), "gzip:2"))
    array = discover(store.get, "x", (number,))
    assert array is not None and array.kind == "array"
    description = array.describe()
    assert (description.shape, description.chunk_shape, description.data_type.itemsize) == ((6, 4), (3, 4), 2)
    assert registry.misplaced(array, group) is None

    key = join_path("x", kept_in.metadata_file)
    store[key] = edit.resized_document(store[key], number, (9, 4))
    resized = discover(store.get, "x", (number,))
    assert resized is not None and resized.describe().shape == (9, 4)


def test_v1_makes_no_groups_and_no_arrays() -> None:
    with pytest.raises(MetadataError):
        documents.new_group(1)
    with pytest.raises(MetadataError):
        creation.new_array_files(1, (2,), np.dtype("<i4"))


# -- a toy format, registered for one test -------------------------------------------------------

TOY = 99
NODE_FILE = "toy.json"  # {"kind": ..., "attributes": ..., and an array's "shape", "chunks"}
LISTING = "toy.listing"  # a group's consolidated metadata: {relative path: its toy.json}


class ToyFormat(Format):
    """int16 arrays, one document per node, a group's listing apart from it."""

    def discover(self, get: Get, path: str, *, consolidated_first: bool) -> NodeMetadata | None:
        raw = get(join_path(path, NODE_FILE))
        if raw is None:
            return None
        doc = json.loads(raw)
        listing = get(join_path(path, LISTING)) if doc["kind"] == "group" else None
        files = (NODE_FILE, *((LISTING,) if listing is not None else ()))
        consolidated = None if listing is None else {
            relative: {NODE_FILE: doc} for relative, doc in json.loads(listing).items()}
        return NodeMetadata(path, doc["kind"], self, files, {NODE_FILE: doc}, {NODE_FILE: raw}, consolidated)

    def listed_node(self, path: str, documents: Mapping[str, Any]) -> NodeMetadata | None:
        return NodeMetadata(path, documents[NODE_FILE]["kind"], self, (NODE_FILE,), dict(documents))

    def attributes(self, documents: Mapping[str, Any]) -> Mapping[str, Any]:
        return documents.get(NODE_FILE, {}).get("attributes", {})  # type: ignore[no-any-return]

    def describe(self, node: NodeMetadata) -> ArrayDescription:
        doc = node.document(NODE_FILE)
        return ArrayDescription(tuple(doc["shape"]), CORE_TYPES["int16"], tuple(doc["chunks"]),
                                ChunkKeyEncoding("default", "/"), bytes(2),
                                (CodecSpec("bytes", {"endian": "little"}, "codecs"),), zarr_format=TOY)

    def dump(self, doc: Any) -> bytes:
        return json.dumps(doc, sort_keys=True).encode()

    def with_attributes(self, stored: bytes | None, attributes: Mapping[str, Any]) -> bytes:
        return self.dump({**json.loads(stored or b"{}"), "attributes": dict(attributes)})

    def new_group_files(self) -> dict[str, bytes]:
        return {NODE_FILE: self.dump({"kind": "group", "attributes": {}}),
                LISTING: self.dump({})}

    def new_array_files(self, shape: Sequence[int], dtype: np.dtype[Any],
                        chunks: Sequence[int] | None, codec: str) -> dict[str, bytes]:
        if dtype != np.dtype("int16"):
            raise MetadataError("dtype", "toy arrays are int16")
        doc = {"kind": "array", "attributes": {}, "shape": list(shape), "chunks": list(chunks or shape)}
        return {NODE_FILE: self.dump(doc)}

    def edit_consolidated(self, stored: bytes, change: ConsolidatedChange) -> bytes | None:
        nodes = {path: {NODE_FILE: doc} for path, doc in json.loads(stored).items()}
        if not apply_change(nodes, change):
            return None
        return self.dump({path: files[NODE_FILE] for path, files in nodes.items()})

    def list_attributes(self, files: dict[str, Any], attributes: Mapping[str, Any]) -> None:
        files[NODE_FILE] = {**files[NODE_FILE], "attributes": dict(attributes)}

    def listed_array(self, consolidated: dict[str, Any], relative: str) -> dict[str, Any] | None:
        entry = consolidated.get(relative)
        return entry if isinstance(entry, dict) and entry.get("kind") == "array" else None


TOY_FORMAT = ToyFormat(zarr_format=TOY, metadata_file=NODE_FILE, attributes_file=NODE_FILE,
                       group_file=NODE_FILE, consolidated_file=LISTING, child_formats=(TOY,),
                       listed_files=(NODE_FILE,), reserved_names=frozenset({NODE_FILE, LISTING}))


def test_a_registered_toy_format_goes_through_the_generic_functions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry.FORMATS, TOY, TOY_FORMAT)
    store: dict[str, bytes] = {}
    put(store, "", documents.new_group(TOY))
    put(store, "a", creation.new_array_files(TOY, (4, 2), np.dtype("int16"), None, "none"))
    with pytest.raises(MetadataError):
        creation.new_array_files(TOY, (4,), np.dtype("float64"))
    listing = documents.edit_consolidated(store[LISTING], TOY, lambda nodes: nodes.update(
        {"a": documents.node_documents({NODE_FILE: store["a/" + NODE_FILE]})}))
    assert listing is not None
    store[LISTING] = listing

    root = discover(store.get, "", (TOY,))
    assert root is not None and root.format is TOY_FORMAT and root.zarr_format == TOY
    assert registry.consolidated_file(root) == LISTING
    children = consolidated_children(root)
    assert children is not None and set(children) == {"a"}
    assert children["a"].describe().shape == (4, 2)
    assert registry.misplaced(children["a"], root) is None
    assert registry.xarray_fill_value(children["a"], {"_ARRAY_DIMENSIONS": ["y", "x"]}) is None

    store[LISTING] = documents.edit_consolidated(store[LISTING], TOY, lambda nodes: edit.resize_listed(
        nodes, "a", TOY, (8, 2))) or b""
    edited = documents.edit_consolidated(store[LISTING], TOY, lambda nodes: documents.set_attributes(
        nodes, "a", TOY, {"units": "m"}))
    assert edited is not None
    store[LISTING] = edited
    listed = consolidated_children(discover(store.get, "", (TOY,)) or root)
    assert listed is not None
    assert listed["a"].describe().shape == (8, 2) and dict(listed["a"].attributes) == {"units": "m"}
    assert documents.edit_consolidated(store[LISTING], TOY, lambda nodes: None) is None

    store["a/" + NODE_FILE] = edit.resized_document(store["a/" + NODE_FILE], TOY, (3, 2))
    array = discover(store.get, "a", (3, 2, 1, TOY))
    assert array is not None and array.describe().shape == (3, 2)
    assert discover(store.get, "a", (3, 2, 1)) is None  # (only the formats asked for are looked for)


def put(store: dict[str, bytes], path: str, files: Mapping[str, bytes]) -> None:
    for name, raw in files.items():
        store[join_path(path, name)] = raw
