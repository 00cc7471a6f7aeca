"""`data.h5` in every group directory (`views.hdf5_group`): the group's arrays, its subgroups
to any depth and their attributes, made as the files of `pyramid_views` are (the arrays
opened when the file is first looked at, made again when one of them changes). Arrays a
dataset cannot hold are left out, said in the log at debug."""

from __future__ import annotations

import logging
from typing import Any

from ..formats.nodes import join_path
from ..views import FileView, MadeView
from ..views.hdf5_group import H5Group, group_file
from ..views.hdf5_view import H5_NAME, h5_dataset, shows_array_h5
from .pyramid_views import ARRAYS_AT_ONCE, PyramidViews

log = logging.getLogger(__name__)
H5_KIND = "h5"  # (its name in `-o views=`, as an array's data.h5)


class H5GroupViews(PyramidViews):
    kind = H5_KIND

    def names(self, group: str) -> list[str]:
        node = self.groups.node(group) if self.enabled else None
        shown = node is not None and node.kind == "group" and H5_NAME not in self.groups.group_children(group)
        return [H5_NAME] if shown else []

    def file(self, group: str, name: str) -> FileView:
        if name not in self.names(group):
            raise FileNotFoundError(join_path(group, name))
        paths, shape = self._below(group)
        directories = ARRAYS_AT_ONCE.map(lambda path: self.groups.open_array(path).directory, paths)
        arrays = {path: d.array for path, d in zip(paths, directories, strict=True)
                  if d is not None and shows_array_h5(d.array)}
        for path in set(paths) - set(arrays):
            log.debug("%s leaves out array %s: no dataset of data.h5 holds it", join_path(group, name), path)

        def make() -> MadeView:
            made = group_file(self._group(group, arrays))
            for note in made.notes:
                log.info("%s: %s", join_path(group, name), note)
            return made.file

        return self.made.get(group, name, list(arrays.values()), make, also=shape)

    def level_paths(self, group: str, name: str) -> list[str]:
        return self._below(group)[0]

    def showing(self, array: str) -> list[tuple[str, str]]:
        return [key for key in self.made.made_above(array) if key[1] == H5_NAME]

    def _below(self, group: str) -> tuple[list[str], list[tuple[str, Any]]]:
        """The paths of the arrays at any depth below `group`, and what the file's structure
        follows: each node's path and attributes."""
        paths: list[str] = []
        shape: list[tuple[str, Any]] = []
        for child in self.groups.group_children(group).values():
            shape.append((child.path, child.attributes))
            if child.kind == "array":
                paths.append(child.path)
            elif child.kind == "group":
                below = self._below(child.path)
                paths += below[0]
                shape += below[1]
        return paths, shape

    def _group(self, group: str, arrays: dict[str, Any]) -> H5Group:
        node = self.groups.node(group)
        children = self.groups.group_children(group)
        datasets = {name: h5_dataset(arrays[c.path], self.byteorder)
                    for name, c in children.items() if c.path in arrays}
        groups = {name: self._group(c.path, arrays) for name, c in children.items() if c.kind == "group"}
        return H5Group(node.attributes if node is not None else {}, datasets, groups)

