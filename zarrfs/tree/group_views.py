"""The files of a group directory that show the whole group, one kind of file per entry of
`views.registry.GROUP_FILE_VIEWS`, each made and kept as `views.group_files` says. Here: their
names in a group directory, their nodes, and the recheck at their open of the arrays they show
(close-to-open, as `data`), asked about together."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from ..formats.nodes import join_path
from ..views import FileView
from ..views.array_dir import ViewSettings
from ..views.group_files import ARRAYS_AT_ONCE, PyramidGroups, PyramidViews
from ..views.registry import GROUP_FILE_VIEWS
from .inodes import DATA, GROUP_VIEW, Ref


class TreeForGroupFiles(PyramidGroups, Protocol):
    """What the tree offers the group files (implemented by `Tree`)."""

    def recheck(self, ref: Ref) -> bool: ...
    def opened_arrays(self) -> Sequence[object]: ...
    def opened_array(self, path: str) -> Any: ...


class GroupViews:
    def __init__(self, groups: TreeForGroupFiles, view_settings: ViewSettings) -> None:
        self.groups = groups
        # (in the order of their names in a directory; a name two kinds give is the first's)
        self.kinds: tuple[PyramidViews, ...] = tuple(
            view.make(groups, view_settings.views, view_settings.form) for view in GROUP_FILE_VIEWS)

    def serves(self, ref: Ref) -> bool:
        return ref.role == GROUP_VIEW

    def names_in(self, group: str) -> list[str]:
        return [name for kind in self.kinds for name in kind.names(group)]

    def _kind_of(self, group: str, name: str) -> PyramidViews | None:
        return next((kind for kind in self.kinds if name in kind.names(group)), None)

    def lookup(self, group: str, name: str) -> Ref | None:
        return Ref(group, GROUP_VIEW, (name,)) if name in self.names_in(group) else None

    def file(self, group: str, name: str) -> FileView:
        kind = self._kind_of(group, name)
        if kind is None:
            raise FileNotFoundError(join_path(group, name))
        return kind.file(group, name)

    def level_paths(self, group: str, name: str) -> list[str]:
        """The paths of the arrays the file shows."""
        kind = self._kind_of(group, name)
        return [] if kind is None else kind.level_paths(group, name)

    def recheck(self, group: str, name: str) -> bool:
        """Close-to-open, as `data`: whether another writer changed any array the file shows.
        The arrays are asked about together."""
        kind = self._kind_of(group, name)
        if kind is None:
            return False
        paths = self.level_paths(group, name)
        rechecked = ARRAYS_AT_ONCE.map(lambda path: self.groups.recheck(Ref(path, DATA)), paths)
        return kind.rechecked(group, name, dict(zip(paths, rechecked, strict=True)))

    def showing(self, array: str) -> list[Ref]:
        """The group files that also show the bytes of the array at `array`."""
        if not array:
            return []
        return [Ref(group, GROUP_VIEW, (name,)) for kind in self.kinds for group, name in kind.showing(array)]
