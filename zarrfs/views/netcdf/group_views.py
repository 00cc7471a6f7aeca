"""`data.nc` of a group directory: its arrays as the variables of a NetCDF classic file
(`group_variables`), served as the other files of a group made of its arrays are
(`views.group_files`).

Listing a group shows `data.nc` in every group directory (it holds only the group's
attributes when no array is one NetCDF can hold). Its header is made from the metadata the
tree knows of the group's arrays, at each open or stat, so neither opens an array (a group
of thousands of arrays is listed with `ls -l` without a request per array); an array is
opened when its bytes are first read. Opening `data.nc` rechecks the arrays as opening `data`
does (close-to-open), several at once. Arrays it cannot hold are named in the log, once each.

It is classic CDF-2 where it can be (`-o nc_format=cdf5`: always CDF-5): 64-bit integer
arrays are served as doubles where doubles hold their values. Whether they do is known only
from the values, so the recheck at open reads them (`classic_types.exact_type`), and an
array one of whose values no double holds is then served as its own type (the file is
CDF-5); a stat uses what the last recheck found (doubles, before any), so it reads nothing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

import numpy as np

from ...declared import choice
from ...errors import MetadataError, ZarrfsError
from ...formats import NodeMetadata
from ...formats.description import ArrayDescription
from ...formats.nodes import join_path
from ...formats.registry import xarray_fill_value
from ..files import FileForm, FileView, RegionArray
from ..group_files import ARRAYS_AT_ONCE, OpenedLevel, PyramidGroups, PyramidViews
from .classic_types import exact_type, needs_values, served_type
from .group_variables import NC_NAME, Member, group_file

log = logging.getLogger(__name__)
NC_KIND = "nc"  # (its name in `-o views=`)
CDF5 = choice(
    "nc_format", {"auto": False, "cdf5": True}, "auto",
    "the form of every group's `data.nc`: `auto` (default) is classic CDF-2 wherever the variables allow "
    "it, unsigned and 64-bit variables served as classic types that hold each value exactly, for readers "
    "without CDF-5 (R's ncdf4, GDAL 3.6, Octave); `cdf5` is CDF-5 with every variable as its own type — see "
    "[views.md](views.md#netcdf-readers-datanc-in-every-group-directory)")


class NcGroups(PyramidGroups, Protocol):
    """What the tree offers (implemented by `Tree`)."""

    def opened_arrays(self) -> Sequence[object]: ...


class NcGroupViews(PyramidViews):
    kind = NC_KIND

    def __init__(self, groups: NcGroups, views: frozenset[str], form: FileForm) -> None:
        super().__init__(groups, views, form.byteorder)
        self.groups: NcGroups = groups
        self.cdf5 = form.options[CDF5]
        self._said: set[str] = set()  # what the log spoke of (an array's path, a note): once each
        # Arrays opened for `data.nc` by path: their metadata is the newest (while the tree
        # still holds them: a deleted array is not).
        self._opened: dict[str, Any] = {}
        self._failed: dict[str, str] = {}  # arrays that cannot be opened: why
        self._described: dict[str, tuple[NodeMetadata, ArrayDescription]] = {}
        # What the last recheck found the classic type of each 64-bit integer array to be (None:
        # none holds its values), with the shape, type and `changes` of the array it read.
        self._exact: dict[str, tuple[tuple[int, ...], np.dtype[Any], np.dtype[Any] | None, object]] = {}
        self._lock = threading.Lock()

    def names(self, group: str) -> list[str]:
        return [NC_NAME] if self.enabled else []

    def file(self, group: str, name: str) -> FileView:
        node = self.groups.node(group)
        if node is None:
            raise FileNotFoundError(join_path(group, NC_NAME))
        live = {id(array) for array in self.groups.opened_arrays()}
        members = [m for m in (self._member(child, live) for child in self._arrays(group)) if m is not None]
        made = group_file(members, node.attributes, cdf5=self.cdf5)
        for name, why in made.left_out.items():
            self._say(join_path(group, name), f"{join_path(group, NC_NAME)} leaves out array {name}: {why}")
        for note in made.notes:
            self._say(f"{group}: {note}", f"{join_path(group, NC_NAME)}: {note}")
        return made.file

    def level_paths(self, group: str, name: str) -> list[str]:
        return [child.path for child in self._arrays(group)]

    def rechecked(self, group: str, name: str, written: Mapping[str, bool]) -> bool:
        """Close-to-open, as `data`: whether another writer changed any array the file shows
        (each is opened: an array never opened before may differ from the metadata the tree
        had of it when it listed the group)."""
        changed = False
        checks = []  # (the values of 64-bit integer arrays, read together too)
        for child in self._arrays(group):
            opened = self.groups.open_array(child.path)
            changed = self._learn(child.path, opened) or written.get(child.path, False) or changed
            if opened.directory is not None:
                array = opened.directory.array
                changed = changed or array.metadata.shape != _described_shape(child)
                token = None if written.get(child.path, False) else array.changes  # (None: read them again)
                checks.append((child.path, array.metadata, array, token))
        checked = list(ARRAYS_AT_ONCE.map(lambda check: self._check_values(*check), checks))  # (all, done)
        return any(checked) or changed

    def showing(self, array: str) -> list[tuple[str, str]]:
        return [(array.rpartition("/")[0], NC_NAME)] if self.enabled else []

    def _arrays(self, group: str) -> list[NodeMetadata]:
        return [c for c in self.groups.group_children(group).values() if c.kind == "array"]

    def _member(self, node: NodeMetadata, live: set[int]) -> Member | None:
        with self._lock:
            array, problem = self._opened.get(node.path), self._failed.get(node.path)
        try:
            if problem is not None:
                raise MetadataError("", f"it cannot be opened: {problem}")
            description = array.metadata if array is not None and id(array) in live else self._describe(node)
        except MetadataError as e:
            group = node.path.rpartition("/")[0]
            self._say(node.path, f"{join_path(group, NC_NAME)} leaves out array {node.name}: {e}")
            return None
        member = Member(node.name, description.data_type, description.shape, description.dimension_names,
                        description.attributes, _fill(node, description.attributes, description),
                        lambda: self._open(node.path))
        return member if self.cdf5 else replace(member, served=self._served(node.path, description))

    def _served(self, path: str, description: ArrayDescription) -> np.dtype[Any] | None:
        """The classic type of the array's elements: as the last recheck found it for an array
        of this shape and type, else the one its type has (`served_type`)."""
        storage = description.data_type.storage
        with self._lock:
            known = self._exact.get(path)
        if known is not None and known[:2] == (description.shape, storage):
            return known[2]
        return served_type(storage)

    def _check_values(self, path: str, description: ArrayDescription, array: RegionArray,
                      changes: object) -> bool:
        """Read a 64-bit integer array's values for its classic type, unless they were read
        when the array's `changes` were these; whether the type changed."""
        storage, shape = description.data_type.storage, description.shape
        if self.cdf5 or not needs_values(storage):
            return False
        with self._lock:
            known = self._exact.get(path)
        unchanged = known is not None and known[:2] == (shape, storage) and known[3] == changes
        if changes is not None and unchanged:
            return False
        before = self._served(path, description)
        try:
            found = exact_type(storage, shape, lambda: array)
        except ZarrfsError as e:  # (it stays as it was: a read of a value it cannot hold fails)
            self._say(f"{path} values", f"{path}: its values could not be read for data.nc: {e}")
            return False
        with self._lock:
            self._exact[path] = (shape, storage, found, changes)
        return found != before

    def _describe(self, node: NodeMetadata) -> ArrayDescription:
        """The node's description, parsed once per version of its metadata (the tree replaces
        the node when the metadata changes)."""
        with self._lock:
            known = self._described.get(node.path)
        if known is not None and known[0] is node:
            return known[1]
        description = node.describe()
        with self._lock:
            self._described[node.path] = (node, description)
        return description

    def _open(self, path: str) -> RegionArray:
        opened = self.groups.open_array(path)
        self._learn(path, opened)
        if opened.directory is None:
            raise MetadataError("", f"{path} cannot be opened: {opened.problem}")
        array: RegionArray = opened.directory.array
        return array

    def _learn(self, path: str, opened: OpenedLevel) -> bool:
        """Keep what opening the array gave; whether it failed for the first time (the next
        header leaves it out)."""
        with self._lock:
            if opened.directory is not None:
                self._opened[path] = opened.directory.array
                return False
            first = path not in self._failed
            self._failed[path] = opened.problem or "unknown"
            return first

    def _say(self, key: str, text: str) -> None:
        with self._lock:
            if key in self._said:
                return
            self._said.add(key)
        log.warning("%s", text)




def _fill(node: NodeMetadata, attributes: Mapping[str, Any], description: ArrayDescription) -> object:
    """What the variable's `_FillValue` is: the CF attribute, or where xarray keeps it
    instead (a v2 array's fill value). Arrays with named dimensions are xarray's, and so are
    scalars (v3 names no dimensions of an array of rank 0: xarray's grid mappings): without
    either, they have none (xarray masks nothing there); others get their fill value."""
    if "_FillValue" in attributes:
        return attributes["_FillValue"]
    stated = xarray_fill_value(node, attributes)
    if stated is not None or description.dimension_names is not None or not description.shape:
        return stated
    storage = description.data_type.storage
    return np.frombuffer(description.fill_value, storage)[0] if storage.kind in "biuf" else None


def _described_shape(node: NodeMetadata) -> tuple[int, ...] | None:
    try:
        return node.describe().shape
    except MetadataError:
        return None
