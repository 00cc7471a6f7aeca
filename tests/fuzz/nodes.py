"""A store made of one fuzzed input, and everything zarrfs does with the nodes it finds there:
discovery (every format, consolidated metadata first and last), attributes, the fill value
xarray states, the children consolidated metadata lists (to any depth), each array's
description and the codec pipeline built from it -- what opening a mount and its arrays
does before any chunk is read."""

from __future__ import annotations

from collections.abc import Mapping

from zarrfs.codecs import ChunkSpec, Pipeline
from zarrfs.formats import NodeMetadata, consolidated_children, discover
from zarrfs.formats.documents import edit_consolidated, set_attributes
from zarrfs.formats.registry import consolidated_file, xarray_fill_value

from .common import expect_typed

# Documents in one input: the first file's bytes, then (after this separator) the second's.
SEPARATOR = b"\0\0"


def store_of(names: tuple[str, ...], payload: bytes) -> dict[str, bytes]:
    """The files `names` at the root of a store, their bytes cut from `payload`."""
    parts = payload.split(SEPARATOR, len(names) - 1)
    return dict(zip(names, parts, strict=False))


def explore(files: Mapping[str, bytes]) -> int:
    """Discover and open what `files` hold; how many groups were found and arrays opened (for
    the seeds' checks), the root counted once per way discovery looks."""
    found = 0
    for consolidated_first in (True, False):
        node = None

        def find(first: bool = consolidated_first) -> None:
            nonlocal node
            node = discover(files.get, "", consolidated_first=first)

        expect_typed(find)
        if node is not None:
            found += visit(node)
    return found


def visit(node: NodeMetadata) -> int:
    """Open one node and every node consolidated metadata lists below it."""
    expect_typed(lambda: dict(node.attributes))
    expect_typed(lambda: xarray_fill_value(node, node.attributes))
    expect_typed(lambda: consolidated_file(node))
    if node.kind == "array":
        return int(expect_typed(lambda: open_array(node)))
    expect_typed(lambda: edit_listing(node))
    children: dict[str, NodeMetadata] = {}

    def listed() -> None:
        children.update(consolidated_children(node) or {})

    expect_typed(listed)
    return 1 + sum(visit(child) for child in children.values())


def open_array(node: NodeMetadata) -> None:
    description = node.describe()
    _ = description.grid_shape, description.nbytes, description.to_json()
    Pipeline.build(description.codecs,
                   ChunkSpec(description.chunk_shape, description.data_type, description.fill_value))


def edit_listing(node: NodeMetadata) -> None:
    """What setting attributes through a mount does to the group's consolidated metadata."""
    name = consolidated_file(node)
    raw = node.raw.get(name) if name is not None else None
    if raw is None:
        return
    for path in (node.consolidated or {}):
        edit_consolidated(raw, node.zarr_format,
                          lambda nodes, p=path: set_attributes(nodes, p, node.zarr_format, {"x": 1}))
