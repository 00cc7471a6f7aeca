"""Whether another writer's new metadata for an open array is only a new shape, which a mount
can take while open (anything else needs a remount)."""

from __future__ import annotations

import dataclasses
import logging

from ..errors import ZarrfsError
from ..formats import ArrayDescription, NodeMetadata

log = logging.getLogger("zarrfs.tree")


def new_shape(fresh: NodeMetadata | None, path: str, shown: ArrayDescription) -> tuple[int, ...] | None:
    """The stored array's shape when it differs from `shown` in its shape alone; else None
    (unchanged, unreadable or changed beyond its shape: logged)."""
    try:
        description = fresh.describe() if fresh is not None and fresh.kind == "array" else None
    except ZarrfsError as e:
        log.warning("array %s: its metadata changed and cannot be read (%s); showing the old", path, e)
        return None
    if description is None or description.shape == shown.shape:
        return None
    if dataclasses.replace(description, shape=shown.shape) != shown:
        log.warning("array %s: its metadata changed beyond its shape; remount to see it", path)
        return None
    return description.shape
