"""The children a group's OME-Zarr metadata names, so they are found where the store cannot
be listed (HTTP servers and CDNs): an image's resolution levels (`multiscales[].datasets[].path`)
and its `labels` group, a labels group's images (`labels`), a plate's wells
(`plate.wells[].path`, two levels: row/column) and a well's fields (`well.images[].path`).
OME-Zarr 0.4 keeps this in the group's attributes, 0.5 under their "ome" member.

Names found here are only candidates: each is probed before it is shown.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

# An image's labels live in this group beside its levels; the image's metadata does not say
# whether there is one, so it is probed.
LABELS_GROUP = "labels"


def declared_paths(attributes: Mapping[str, Any]) -> list[str]:
    """Paths relative to the group ("0", "labels/cells", "A/1") of the nodes its OME-Zarr
    metadata names, first seen first."""
    ome = attributes.get("ome")
    block = ome if isinstance(ome, Mapping) else attributes
    found: list[str] = []
    multiscales = _list(block.get("multiscales"))
    for scale in multiscales:
        found += _paths(_list(scale.get("datasets") if isinstance(scale, Mapping) else None))
    if multiscales and "image-label" not in block:  # (a label image has no labels)
        found.append(LABELS_GROUP)
    found += [name for name in _list(block.get("labels")) if isinstance(name, str)]
    for kind, member in (("plate", "wells"), ("well", "images")):
        described = block.get(kind)
        if isinstance(described, Mapping):
            found += _paths(_list(described.get(member)))
    return [path for path in dict.fromkeys(found) if _is_relative(path)]


def declared_below(path: str, attributes_of: Callable[[str], Mapping[str, Any] | None]) -> list[str]:
    """The names directly below the group at `path` that the OME-Zarr metadata of it or of a
    group above it names. `attributes_of`: a group's attributes by path (None: not known)."""
    names: dict[str, None] = {}
    above: str | None = path
    while above is not None:
        attributes = attributes_of(above)
        relative = path[len(above):].strip("/")
        for declared in declared_paths(attributes or {}):
            if not relative or declared.startswith(relative + "/"):
                names[declared[len(relative):].strip("/").split("/", 1)[0]] = None
        above = above.rpartition("/")[0] if above else None
    return list(names)


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _paths(entries: Iterable[object]) -> Iterator[str]:
    for entry in entries:
        path = entry.get("path") if isinstance(entry, Mapping) else None
        if isinstance(path, str):
            yield path.strip("/")


def _is_relative(path: str) -> bool:
    """Below the group: no empty, "." or ".." parts (metadata is data; it cannot send a probe
    elsewhere on the server)."""
    return bool(path) and all(part not in ("", ".", "..") for part in path.split("/"))
