"""TIFF files of a group directory made of several of its arrays (the levels of a multiscale
pyramid): `data.ome.tif` of OME-Zarr images (`ome_views`) and the GeoTIFFs of GeoZarr
multiscale groups (`views.geo_pyramid`, here). A file is made when first looked at, from the
levels opened then, and made again when one of them changes (a write, a resize); each open
fetches again the tiles fetched before it (close-to-open, as `data.tif`)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from ..errors import MetadataError
from ..formats import NodeMetadata
from ..formats.nodes import join_path
from ..views import FileView, MadeView
from ..views.array_dir import ArrayDirectory
from ..views.geo_pyramid import ARRAY_LEVELS_NAME, Level, level_placement, pyramid_file, pyramid_levels
from ..views.tiff_view import shows_tiff

TIFF_KIND = "tif"  # (its name in `-o views=`, as `data.tif`'s)
# The arrays a group's file shows are opened, and rechecked at its open, together (here and in
# `group_views`): on a remote store each is a request, so a few round trips rather than one per
# array (data.nc of 33 arrays on S3 20 ms away, reopened: 875 -> 190 ms). Its jobs use no pool.
ARRAYS_AT_ONCE = ThreadPoolExecutor(8, thread_name_prefix="zarrfs-group-arrays")


class Opened(Protocol):
    directory: ArrayDirectory | None  # None: it cannot be opened, because of `problem`
    problem: str | None


class Groups(Protocol):
    def node(self, path: str) -> NodeMetadata | None: ...
    def group_children(self, path: str) -> dict[str, NodeMetadata]: ...
    def open_array(self, path: str) -> Opened: ...


def opened_levels(groups: Groups, paths: Sequence[str]) -> list[ArrayDirectory]:
    """The levels at `paths`, opened together (FileNotFoundError: one cannot be)."""
    return list(ARRAYS_AT_ONCE.map(lambda path: opened_level(groups, path), paths))


def opened_level(groups: Groups, path: str) -> ArrayDirectory:
    _look_up(groups, path)
    opened = groups.open_array(path)
    if opened.directory is None:
        raise FileNotFoundError(f"{path} cannot be opened: {opened.problem}")
    return opened.directory


def _look_up(groups: Groups, path: str) -> None:
    """Make the node at `path` known, with the groups above it (a pyramid file opened by its
    path on a fresh mount, before anything listed its group)."""
    parts = path.split("/")
    for depth in range(1, len(parts) + 1):
        if groups.node("/".join(parts[:depth])) is None:
            groups.group_children("/".join(parts[: depth - 1]))


class MadeFiles:
    """Files made of opened arrays, by (group, name), kept while none of the arrays changes."""

    def __init__(self) -> None:
        self._made: dict[tuple[str, str], tuple[object, MadeView]] = {}
        self._lock = threading.Lock()

    def get(self, group: str, name: str, arrays: Sequence[Any],
            make: Callable[[], MadeView | None], also: object = None) -> FileView:
        """The file made of `arrays`, made again when one changes or `also` (what else it
        shows) differs."""
        state = [(id(array), tuple(array.shape), array.changes) for array in arrays], also
        with self._lock:
            made = self._made.get((group, name))
            if made is not None and made[0] == state:
                return made[1]
        found = make()
        if found is None:
            raise FileNotFoundError(f"{join_path(group, name)}: its levels are no TIFF images")
        with self._lock:
            self._made[(group, name)] = (state, found)
        return found

    def refetch(self, group: str, name: str) -> None:
        """The file's tiles fetched before are fetched again as they are next read."""
        with self._lock:
            made = self._made.get((group, name))
        if made is not None:
            made[1].forget_fetched()

    def made_above(self, path: str) -> list[tuple[str, str]]:
        """The files made in groups above `path`."""
        with self._lock:
            return [key for key in self._made if path.startswith(f"{key[0]}/") or not key[0]]


class PyramidViews:
    """What the pyramid files of one kind share: their `-o views=` kind, the files made."""

    kind = ""

    def __init__(self, groups: Groups, views: frozenset[str], byteorder: str) -> None:
        self.groups = groups
        self.enabled = self.kind in views
        self.byteorder = byteorder
        self.made = MadeFiles()

    def names(self, group: str) -> list[str]:
        raise NotImplementedError

    def file(self, group: str, name: str) -> FileView:
        raise NotImplementedError

    def level_paths(self, group: str, name: str) -> list[str]:
        """The paths of the arrays the file shows (its levels), to recheck at its open."""
        raise NotImplementedError

    def refetch(self, group: str, name: str) -> None:
        """An open of the file (close-to-open): another writer may have changed a level's
        tiles since they were fetched. (The file is made again when a level's shape or
        elements change: `MadeFiles.get`; its levels are rechecked first.)"""
        self.made.refetch(group, name)

    def showing(self, array: str) -> list[tuple[str, str]]:
        """The (group, name) of the files made that show the array at `array`."""
        return self.made.made_above(array)


class GeoTiffViews(PyramidViews):
    """The GeoTIFFs of multiscale groups, GeoZarr's and OME-Zarr images' (`views.geo_pyramid`)."""

    kind = TIFF_KIND

    def __init__(self, groups: Groups, views: frozenset[str], byteorder: str) -> None:
        super().__init__(groups, views, byteorder)
        self._tiffable: dict[str, tuple[NodeMetadata, bool]] = {}  # (parsed once per metadata)

    def names(self, group: str) -> list[str]:
        return sorted(self._variables(group))

    def file(self, group: str, name: str) -> FileView:
        node = self.groups.node(group)
        layout = pyramid_levels(node.attributes) if node is not None else None
        listed = self._variables(group).get(name) or []
        arrays = ARRAYS_AT_ONCE.map(lambda path: self.groups.open_array(path).directory,
                                    [path for path, _ in listed])
        opened = list(zip(arrays, [level for _, level in listed], strict=True))
        levels = [(directory, level) for directory, level in opened if directory is not None]
        if node is None or layout is None or not levels:  # (levels that cannot be opened are left out)
            raise FileNotFoundError(join_path(group, name))
        directories = [directory for directory, _ in levels]

        def make() -> MadeView | None:
            number = max(range(len(levels)), key=lambda n: _area(directories[n].array.shape))
            full, level = directories[number], levels[number][1]
            placement = level_placement(full.placement, level, level == layout[0], node.attributes,
                                        full.array.metadata.dimension_names)
            return pyramid_file([d.array for d in directories], placement, self.byteorder)

        return self.made.get(group, name, [d.array for d in directories], make)

    def level_paths(self, group: str, name: str) -> list[str]:
        return [path for path, _ in self._variables(group).get(name) or []]

    def _variables(self, group: str) -> dict[str, list[tuple[str, Level]]]:
        """Each file's name: the arrays it shows (their paths, and their levels)."""
        node = self.groups.node(group) if self.enabled else None
        levels = pyramid_levels(node.attributes) if node is not None and node.kind == "group" else None
        if levels is None:
            return {}
        nodes = [self._below(group, level.asset) for level in levels]
        kinds = {found.kind for found in nodes if found is not None}
        found: dict[str, list[tuple[str, Level]]] = {}
        if kinds == {"array"}:
            found[ARRAY_LEVELS_NAME] = [(n.path, level) for n, level in zip(nodes, levels, strict=True)
                                        if n is not None and self._shows_tiff(n)]
        elif kinds == {"group"}:
            for level_node, level in zip(nodes, levels, strict=True):
                for name, child in self.groups.group_children(level_node.path).items() if level_node else ():
                    if child.kind == "array" and self._shows_tiff(child):
                        found.setdefault(f"{name}.tif", []).append((child.path, level))
        taken = self.groups.group_children(group)
        return {name: arrays for name, arrays in found.items() if arrays and name not in taken}

    def _shows_tiff(self, node: NodeMetadata) -> bool:
        known = self._tiffable.get(node.path)
        if known is not None and known[0] is node:
            return known[1]
        try:
            shows = shows_tiff(node.describe())
        except MetadataError:
            shows = False
        self._tiffable[node.path] = (node, shows)
        return shows

    def _below(self, group: str, asset: str) -> NodeMetadata | None:
        node: NodeMetadata | None = None
        path = group
        for part in asset.split("/"):
            if node is not None and node.kind != "group":
                return None
            node = self.groups.group_children(path).get(part)
            if node is None:
                return None
            path = node.path
        return node


def _area(shape: Sequence[int]) -> int:
    return int(shape[-2]) * int(shape[-1]) if len(shape) >= 2 else 0
