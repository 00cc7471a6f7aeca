"""`zarrfs resize`: change the shape of an array that is not mounted, and of its entry in the
consolidated metadata of the groups above it (zarr-python trusts those)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..array_metadata import open_array, resized_in_listing
from ..formats import discover
from ..formats.registry import consolidated_file
from ..store import Store

# How far up to look for groups with consolidated metadata.
MAX_LEVELS = 16


def resize_offline(source: str, storage: Mapping[str, Any], shape: tuple[int, ...]) -> list[str]:
    """Resize the array at `source`; the groups whose consolidated metadata were updated."""
    array = open_array(Store.open(source, storage))
    try:
        array.resize(shape)
        array_format = array.metadata.zarr_format
    finally:
        array.close()
    updated = []
    child, parent = _split(source.rstrip("/"))
    relative = child
    for _ in range(MAX_LEVELS):
        if not parent:
            break
        store = Store.open(parent, storage)
        node = discover(store.get, "")
        if node is None or node.kind != "group":
            break
        name = consolidated_file(node)
        raw = None if name is None else store.get(name)
        new = None if raw is None else resized_in_listing(node, raw, relative, array_format, shape)
        if name is not None and new is not None:
            store.put(name, new)
            updated.append(parent)
        child, parent = _split(parent)
        relative = f"{child}/{relative}"
    return updated


def _split(path: str) -> tuple[str, str]:
    """(last component, the rest) of a path or URL; no rest above a URL's bucket or root."""
    parent, _, name = path.rpartition("/")
    if parent.endswith(":/") or parent.endswith(":") or not name:
        return name, ""
    return name, parent
