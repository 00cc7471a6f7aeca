"""The GeoTIFFs with overviews of multiscale groups, GeoZarr's and OME-Zarr images'
(`geo_pyramid`), made and kept as the other files of a group made of its arrays are
(`views.group_files`)."""

from __future__ import annotations

from collections.abc import Sequence

from ...errors import MetadataError
from ...formats import NodeMetadata
from ...formats.nodes import join_path
from ..files import FileForm, FileView, MadeView
from ..group_files import ARRAYS_AT_ONCE, PyramidGroups, PyramidViews
from .array_file import shows_tiff
from .geo_pyramid import ARRAY_LEVELS_NAME, Level, level_placement, pyramid_file, pyramid_levels

TIFF_KIND = "tif"  # (its name in `-o views=`, as `data.tif`'s)


class GeoTiffViews(PyramidViews):
    """The GeoTIFFs of multiscale groups, GeoZarr's and OME-Zarr images' (`views.tiff.geo_pyramid`)."""

    kind = TIFF_KIND

    def __init__(self, groups: PyramidGroups, views: frozenset[str], form: FileForm) -> None:
        super().__init__(groups, views, form.byteorder)
        self.form = form  # (its tiles: as stored, or decoded, as `data.tif`'s)
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
            return pyramid_file([d.array for d in directories], placement, self.form)

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
