"""What the files of a group directory made of several of its arrays share (the levels of a
multiscale pyramid: `data.ome.tif` of OME-Zarr images and the GeoTIFFs of GeoZarr multiscale
groups, `tiff`; a group's `data.h5`, `hdf5`): what they ask of the tree that serves them, the
levels opened together, and the files made. A file is made when first looked at, from the
levels opened then, and made again when one of them changes (a write, a resize); each open
fetches again the tiles fetched before it (close-to-open, as `data.tif`)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from ..formats import NodeMetadata
from ..formats.nodes import join_path
from .files import FileView, MadeView
from .placement import Placement

# The arrays a group's file shows are opened, and rechecked at its open, together (here and in
# `group_views`): on a remote store each is a request, so a few round trips rather than one per
# array (data.nc of 33 arrays on S3 20 ms away, reopened: 875 -> 190 ms). Its jobs use no pool.
ARRAYS_AT_ONCE = ThreadPoolExecutor(8, thread_name_prefix="zarrfs-group-arrays")


class LevelDirectory(Protocol):
    """An opened array's directory (`array_dir.ArrayDirectory`), as a group's file reads it."""

    array: Any

    @property
    def placement(self) -> Placement: ...


class OpenedLevel(Protocol):
    @property
    def directory(self) -> LevelDirectory | None:
        """None: it cannot be opened, because of `problem`."""

    @property
    def problem(self) -> str | None: ...


class PyramidGroups(Protocol):
    def node(self, path: str) -> NodeMetadata | None: ...
    def group_children(self, path: str) -> dict[str, NodeMetadata]: ...
    def open_array(self, path: str) -> OpenedLevel: ...


def opened_levels(groups: PyramidGroups, paths: Sequence[str]) -> list[LevelDirectory]:
    """The levels at `paths`, opened together (FileNotFoundError: one cannot be)."""
    return list(ARRAYS_AT_ONCE.map(lambda path: opened_level(groups, path), paths))


def opened_level(groups: PyramidGroups, path: str) -> LevelDirectory:
    _look_up(groups, path)
    opened = groups.open_array(path)
    if opened.directory is None:
        raise FileNotFoundError(f"{path} cannot be opened: {opened.problem}")
    return opened.directory


def _look_up(groups: PyramidGroups, path: str) -> None:
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

    def __init__(self, groups: PyramidGroups, views: frozenset[str], byteorder: str) -> None:
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

    def rechecked(self, group: str, name: str, written: Mapping[str, bool]) -> bool:
        """Whether the file changed at its open, its arrays rechecked (`written`: whether
        another writer changed each, by path)."""
        self.refetch(group, name)
        return any(written.values())

    def showing(self, array: str) -> list[tuple[str, str]]:
        """The (group, name) of the files made that show the array at `array`."""
        return self.made.made_above(array)
