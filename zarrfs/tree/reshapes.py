"""An opened array's new shape, taken into every file that shows it: another writer's, found
at an open (close-to-open: the metadata's generation against its baseline,
`MetadataGenerations`), and this mount's own (a resize through `data`). The metadata shown
follows, and so do the consolidated metadata of the groups above."""

from __future__ import annotations

import logging
from typing import Protocol

from ..array_metadata import resized_listing
from ..formats import NodeMetadata, discover
from ..store import Store
from ..views.array_dir import ArrayDirectory
from .edits import Edits
from .metadata_generations import MetadataGenerations
from .reshaped import new_shape

log = logging.getLogger(__name__)


class Arrays(Protocol):
    """What this needs of the tree (implemented by `Tree`)."""

    store: Store
    rechecks: bool
    generations: MetadataGenerations
    edits: Edits

    def node(self, path: str) -> NodeMetadata | None: ...
    def show_new_metadata(self, path: str, opened: ArrayDirectory) -> None: ...


class Reshapes:
    def __init__(self, arrays: Arrays) -> None:
        self.arrays = arrays

    def recheck(self, path: str, opened: ArrayDirectory) -> bool:
        """Whether another writer resized the array at `path` (its new shape then taken)."""
        node = self.arrays.node(path)
        if node is None or not self.arrays.generations.changed(path, node.files[0]):
            return False
        fresh = discover(self.arrays.store.get, path, (node.zarr_format,), consolidated_first=False)
        shape = new_shape(fresh, path, opened.array.metadata)
        if fresh is None or shape is None:
            return False
        log.info("array %s was resized to %s by another writer", path, list(shape))
        opened.array.adopt_shape(shape, fresh.raw.get(fresh.files[0], b""))
        opened.reshaped()
        self.arrays.show_new_metadata(path, opened)
        return True

    def resized(self, path: str, opened: ArrayDirectory, shape: tuple[int, ...]) -> None:
        """This mount resized the array at `path` through `data`: the metadata shown, and the
        consolidated metadata above that lists the array (zarr-python trusts it), follow."""
        node = self.arrays.node(path)
        assert node is not None
        if self.arrays.rechecks:
            self.arrays.generations.written(path, node.files[0])
        self.arrays.edits.update_consolidated(path, resized_listing(node.zarr_format, shape))
        self.arrays.show_new_metadata(path, opened)
