"""`zarrfs resize`: change the shape of an array that is not mounted, and of its entry in the
consolidated metadata of the groups above it (zarr-python trusts those)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import closing

from ..array_metadata import open_array, resized_in_listing
from ..daemon.mountpoint import unescape
from ..errors import ResizeError
from ..formats import consolidated_file, discover
from ..store import SourceOptions, open_store

# How far up to look for groups with consolidated metadata.
MAX_LEVELS = 16
LOCAL_SCHEMES = ("file://", "local://")


def resize_offline(source: str, options: SourceOptions, shape: tuple[int, ...], *,
                   force: bool = False) -> list[str]:
    """Resize the array at `source`; the groups whose consolidated metadata were updated.
    ResizeError when a zarrfs mount serves it (unless `force`): that daemon's cached chunks and
    metadata would go stale, and its write-back could store chunks past the new edge."""
    for mounted, mountpoint in [] if force else zarrfs_mounts():
        if _serves(mounted, source):
            raise ResizeError(f"{source} is mounted at {mountpoint}: unmount it first, resize "
                              f"its first dimension there with truncate on data, or give --force")
    with closing(open_store(source, options)) as store:
        array = open_array(store)
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
        with closing(open_store(parent, options)) as store:
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


def zarrfs_mounts(table: str = "/proc/mounts") -> Iterator[tuple[str, str]]:
    """(source, mountpoint) of each zarrfs mount of the machine."""
    try:
        with open(table) as f:
            lines = f.readlines()
    except OSError:
        return
    for line in lines:
        fields = line.split()
        if len(fields) > 2 and fields[2] == "fuse.zarrfs":
            yield unescape(fields[0]), unescape(fields[1])


def _serves(mounted: str, source: str) -> bool:
    """Whether a mount of `mounted` shows `source`: the same node or a group above it (a local
    path however it is spelt: relative, through a symlink, or as a file:// URL)."""
    mounted, source = _canonical(mounted), _canonical(source)
    return source == mounted or source.startswith(mounted + "/")


def _canonical(source: str) -> str:
    for scheme in LOCAL_SCHEMES:
        if source.startswith(scheme):
            source = source[len(scheme):]
            break
    if "://" not in source and "::" not in source:
        source = os.path.realpath(source)
    return source.rstrip("/")


def _split(path: str) -> tuple[str, str]:
    """(last component, the rest) of a path or URL; no rest above a URL's bucket or root."""
    parent, _, name = path.rpartition("/")
    if parent.endswith(":/") or parent.endswith(":") or not name:
        return name, ""
    return name, parent
