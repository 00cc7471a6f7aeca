"""`data.h5` in every group directory (`views.hdf5.group_file`): the group's arrays, its subgroups
to any depth and their attributes. Made as `data.nc` is, from the metadata the tree knows of
the arrays (`views.hdf5.described`; an array the tree has open: the array), so `ls -l` of a
group opens no array; an array is opened when its chunks are first read. Kept as the files of
`views.group_files` are, made again when an array or the groups below change; its open rechecks
the arrays (close-to-open). Arrays a dataset cannot hold are left out, said in the log at
debug."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Protocol

from ...errors import ZarrfsError
from ...formats import NodeMetadata
from ...formats.nodes import join_path
from ..files import FileForm, FileView, MadeView
from ..group_files import ARRAYS_AT_ONCE, PyramidGroups, PyramidViews
from ..plugins import PLUGIN_FILTERS
from .array_file import H5_NAME, AnyDataset, h5_dataset, shows_array_h5
from .chars import CharArray, char_dataset, shows_chars_h5
from .described import DescribedArray
from .group_file import H5Group, group_file
from .strings import GROUP_CHUNKS, StringDataset, StringSource, UnicodeStrings, shows_unicode_h5

log = logging.getLogger(__name__)
H5_KIND = "h5"  # (its name in `-o views=`, as an array's data.h5)


class H5Groups(PyramidGroups, Protocol):
    def opened_array(self, path: str) -> Any: ...
    def open_array(self, path: str) -> Any: ...


class H5GroupViews(PyramidViews):
    kind = H5_KIND

    def __init__(self, groups: H5Groups, views: frozenset[str], form: FileForm) -> None:
        super().__init__(groups, views, form.byteorder)
        self.form = form
        self.groups: H5Groups = groups
        # The arrays not opened, as described, by path (made again when the tree's node is).
        self._described: dict[str, tuple[NodeMetadata, DescribedArray]] = {}
        self._seen: dict[str, Any] = {}  # (path -> UnicodeStrings or CharArray)
        self._lock = threading.Lock()

    def names(self, group: str) -> list[str]:
        """data.h5 in every group directory, as data.nc (looked up before the children: a
        lookup lists nothing)."""
        node = self.groups.node(group) if self.enabled else None
        return [H5_NAME] if node is not None and node.kind == "group" else []

    def file(self, group: str, name: str) -> FileView:
        """The file, made from the arrays the tree has open and the descriptions of the others
        (a stat opens no array of numbers, and an array is opened when its chunks are first
        read; arrays of strings are opened, and their chunks decoded, to size their heaps)."""
        if name not in self.names(group):
            raise FileNotFoundError(join_path(group, name))
        nodes, shape = self._below(group)
        arrays = {node.path: array for node in nodes if (array := self._array(node)) is not None}
        for node in nodes:
            if node.path not in arrays:
                log.debug("%s leaves out array %s: no dataset of data.h5 holds it", join_path(group, name),
                          node.path)

        def make() -> MadeView:
            made = group_file(self._group(group, arrays))
            for note in made.notes:
                log.info("%s: %s", join_path(group, name), note)
            return made.file

        return self.made.get(group, name, list(arrays.values()), make, also=shape)

    def _array(self, node: NodeMetadata) -> Any:
        """The array at `node` as the file shows it (opened, or as described), or None."""
        array: Any = self.groups.opened_array(node.path)
        if array is None:
            with self._lock:
                known = self._described.get(node.path)
            if known is not None and known[0] is node:
                array = known[1]
            else:
                try:
                    array = DescribedArray(node.describe(), lambda: self._open(node.path))
                except ZarrfsError:  # (strings; else its metadata or codecs: its directory says why)
                    return self._strings(node)
                with self._lock:
                    self._described[node.path] = (node, array)
        if shows_unicode_h5(array):
            return self._seen_as(node.path, array, UnicodeStrings)  # (sized without a read)
        if shows_chars_h5(array):
            return self._seen_as(node.path, array, CharArray)
        return array if shows_array_h5(array) else None

    def _seen_as(self, path: str, array: Any, kind: Callable[[Any], Any]) -> Any:
        """`array` as a dataset of another type sees it (numpy `U` strings, `S` bytes): one
        object while the array is the same (the file is made again when its arrays change)."""
        with self._lock:
            known = self._seen.get(path)
            if known is None or known.array is not array:
                known = self._seen[path] = kind(array)
            return known

    def _strings(self, node: NodeMetadata) -> StringSource | None:
        """An array of strings as its directory's data.h5 shows it (opening it reads no chunk)."""
        strings = self.groups.open_array(node.path).strings
        return None if strings is None else _few_chunks(node, strings.source)

    def _open(self, path: str) -> Any:
        directory = self.groups.open_array(path).directory
        if directory is None:
            raise FileNotFoundError(f"{path} cannot be opened")
        return directory.array

    def level_paths(self, group: str, name: str) -> list[str]:
        return [node.path for node in self._below(group)[0]]

    def showing(self, array: str) -> list[tuple[str, str]]:
        return [key for key in self.made.made_above(array) if key[1] == H5_NAME]

    def _below(self, group: str) -> tuple[list[NodeMetadata], list[tuple[str, Any]]]:
        """The arrays at any depth below `group`, and what the file's structure follows: each
        node's path and attributes. The groups of each depth are listed at once: on a remote
        store without consolidated metadata a depth costs a few round trips, not each group
        (24 subgroups of 2 arrays on S3 at 20 ms: a stat of the root's file 1.5 s -> 0.2 s)."""
        arrays: list[NodeMetadata] = []
        shape: list[tuple[str, Any]] = []
        level = [group]
        while level:
            listed = list(ARRAYS_AT_ONCE.map(self.groups.group_children, level))
            level = []
            for children in listed:
                for child in children.values():
                    shape.append((child.path, child.attributes))
                    if child.kind == "array":
                        arrays.append(child)
                    elif child.kind == "group":
                        level.append(child.path)
        return arrays, shape

    def _group(self, group: str, arrays: dict[str, Any]) -> H5Group:
        node = self.groups.node(group)
        children = self.groups.group_children(group)
        datasets = {name: self._dataset(arrays[c.path]) for name, c in children.items() if c.path in arrays}
        groups = {name: self._group(c.path, arrays) for name, c in children.items() if c.kind == "group"}
        return H5Group(node.attributes if node is not None else {}, datasets, groups)

    def _dataset(self, array: Any) -> AnyDataset:
        if isinstance(array, StringSource):
            return StringDataset(array)
        if isinstance(array, CharArray):
            return char_dataset(array, self.form.options[PLUGIN_FILTERS])
        return h5_dataset(array, self.form)


def _few_chunks(node: NodeMetadata, source: StringSource | None) -> StringSource | None:
    """`source`, unless sizing its heaps at the group file's first stat (which `ls -l` of the
    group makes) would read more than GROUP_CHUNKS chunks: then the array is left out."""
    if source is None or source.chunk_count <= GROUP_CHUNKS:
        return source
    log.debug("groups' data.h5 leave out array %s of strings: its %d chunks would be read at a stat",
              node.path, source.chunk_count)
    return None
