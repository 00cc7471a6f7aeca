"""The Zarr formats by number, and what callers outside `formats` ask of a node's format
instead of branching on its number (outside a format's own modules, nothing should).

A new format is its own modules: `vN.py` reading its array documents into an
`ArrayDescription`, and `vN_format.py` with a subclass of `format.Format` that implements
every abstract method -- `discover`, `listed_node`, `attributes`, `describe`, `dump`,
`with_attributes`, `new_group_files`, `new_array_files`, `edit_consolidated`,
`list_attributes` (and overrides `xarray_fill_value` if xarray has a habit
there) -- and a `FORMAT` instance of it giving its number, its file names (`metadata_file`,
`attributes_file`, `group_file`, `consolidated_file`, `listed_files`, `reserved_names`) and
the formats its groups hold (`child_formats`). It is registered by one line, its `FORMAT` in
`_REGISTERED` below (after `from . import vN_format`); their order is the order discovery
looks for formats at a path. tests/formats/test_format_registry.py checks the interface is whole.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import v1_format, v2_format, v3_format
from .format import Format, NodeMetadata

_REGISTERED = (  # in the order discovery looks for them at a path
    v3_format.FORMAT,
    v2_format.FORMAT,
    v1_format.FORMAT,
)
FORMATS: dict[int, Format] = {f.zarr_format: f for f in _REGISTERED}


def format_of(node: NodeMetadata) -> Format:
    return node.format


def consolidated_file(node: NodeMetadata) -> str | None:
    """The stored file holding a group's consolidated metadata, or None when it has none
    (an array; a format without; a v3 group whose zarr.json lacks the member)."""
    found = format_of(node)
    name = found.consolidated_file
    if node.kind != "group" or name is None or name not in node.files:
        return None
    return None if found.consolidated_inline and node.consolidated is None else name


def misplaced(node: NodeMetadata, group: NodeMetadata) -> str | None:
    """Why `node` cannot be a child of `group` (formats that cannot be mixed), or None."""
    if format_of(group).holds(node.zarr_format):
        return None
    return f"a Zarr v{node.zarr_format} node cannot be in a v{group.zarr_format} group"


def xarray_fill_value(node: NodeMetadata, attributes: Mapping[str, Any]) -> object:
    """The fill value xarray stated in the array's document instead of its attributes (a v2
    array's `_FillValue`, kept as its `fill_value`; `attributes` are the array's), or None."""
    return format_of(node).xarray_fill_value(node, attributes)
