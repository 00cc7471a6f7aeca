"""`data.ome.tif` in the directory of an OME-Zarr image group (`views.tiff.ome_tiff`), made as the
files of `views.group_files` are."""

from __future__ import annotations

from ...formats.nodes import join_path
from ..files import FileForm, FileView
from ..group_files import PyramidGroups, PyramidViews, opened_levels
from .ome_tiff import OME_TIFF_NAME, Multiscale, multiscale_of, ome_tiff_file

OME_KIND = "ome"  # (its name in `-o views=`)


class OmeTiffViews(PyramidViews):
    kind = OME_KIND

    def __init__(self, groups: PyramidGroups, views: frozenset[str], form: FileForm) -> None:
        super().__init__(groups, views, form.byteorder)
        self.form = form  # (its tiles: as stored, or decoded, as `data.tif`'s)

    def names(self, group: str) -> list[str]:
        node = self.groups.node(group) if self.enabled else None
        return [OME_TIFF_NAME] if node is not None and multiscale_of(node.attributes) else []

    def file(self, group: str, name: str) -> FileView:
        multiscale = self._multiscale(group, name)
        if multiscale is None:
            raise FileNotFoundError(join_path(group, name))
        paths = [join_path(group, path) for path in multiscale.paths]
        levels = [directory.array for directory in opened_levels(self.groups, paths)]
        return self.made.get(group, name, levels, lambda: ome_tiff_file(multiscale, levels, self.form))

    def level_paths(self, group: str, name: str) -> list[str]:
        multiscale = self._multiscale(group, name)
        return [] if multiscale is None else [join_path(group, path) for path in multiscale.paths]

    def _multiscale(self, group: str, name: str) -> Multiscale | None:
        node = self.groups.node(group)
        return None if node is None or name != OME_TIFF_NAME else multiscale_of(node.attributes)

    def showing(self, array: str) -> list[tuple[str, str]]:
        """The group whose `data.ome.tif` shows the array at `array` (one of its levels)."""
        group, _, name = array.rpartition("/")
        node = self.groups.node(group) if self.enabled and name else None
        multiscale = None if node is None else multiscale_of(node.attributes)
        return [(group, OME_TIFF_NAME)] if multiscale is not None and name in multiscale.paths else []
