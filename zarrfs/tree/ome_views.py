"""`data.ome.tif` in the directory of an OME-Zarr image group (`views.ome_tiff`): its levels
opened when the file is first looked at, the file made again when one of them changes (a
write, a resize) and at each open (close-to-open, as `data`)."""

from __future__ import annotations

import logging
import threading
from typing import Any, Protocol

from ..formats import NodeMetadata
from ..formats.nodes import join_path
from ..views import FileView
from ..views.array_dir import ArrayDirectory
from ..views.ome_tiff import OME_TIFF_NAME, multiscale_of, ome_tiff_file

log = logging.getLogger(__name__)
OME_KIND = "ome"  # (its name in `-o views=`)


class Opened(Protocol):
    directory: ArrayDirectory | None
    problem: str | None


class Groups(Protocol):
    def node(self, path: str) -> NodeMetadata | None: ...
    def open_array(self, path: str) -> Opened: ...


class OmeTiffViews:
    def __init__(self, groups: Groups, views: frozenset[str], byteorder: str) -> None:
        self.groups = groups
        self.enabled = OME_KIND in views
        self.byteorder = byteorder
        self._made: dict[str, tuple[Any, FileView]] = {}  # group -> (what it was made of, file)
        self._lock = threading.Lock()

    def names(self, group: str) -> list[str]:
        node = self.groups.node(group) if self.enabled else None
        return [OME_TIFF_NAME] if node is not None and multiscale_of(node.attributes) else []

    def file(self, group: str) -> FileView:
        node = self.groups.node(group)
        multiscale = None if node is None else multiscale_of(node.attributes)
        if multiscale is None:
            raise FileNotFoundError(join_path(group, OME_TIFF_NAME))
        levels = [self._level(join_path(group, path)) for path in multiscale.paths]
        state = [(id(level), tuple(level.shape), level.changes) for level in levels]
        with self._lock:
            made = self._made.get(group)
            if made is not None and made[0] == state:
                return made[1]
        found = ome_tiff_file(multiscale, levels, self.byteorder)
        if found is None:
            raise FileNotFoundError(f"{join_path(group, OME_TIFF_NAME)}: its levels are no TIFF images")
        with self._lock:
            self._made[group] = (state, found)
        return found

    def forget(self, group: str) -> None:
        """Make the file again when next asked for (another writer may have changed a level)."""
        with self._lock:
            self._made.pop(group, None)

    def showing(self, array: str) -> list[str]:
        """The group whose `data.ome.tif` shows the array at `array` (one of its levels)."""
        group, _, name = array.rpartition("/")
        node = self.groups.node(group) if self.enabled and name else None
        multiscale = None if node is None else multiscale_of(node.attributes)
        return [group] if multiscale is not None and name in multiscale.paths else []

    def _level(self, path: str) -> Any:
        opened = self.groups.open_array(path)
        if opened.directory is None:
            raise FileNotFoundError(f"{path} cannot be opened: {opened.problem}")
        return opened.directory.array
