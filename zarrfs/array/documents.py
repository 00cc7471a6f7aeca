"""The metadata document of an array, as the array layer's default `MetadataWriter`
(zarrfs.array.resize) stores it on a resize: the stored document edited in place.

The array layer only asks "store this new shape"; the document's format is the metadata
layer's (zarrfs.formats.edit). This default serves arrays opened without a writer of their own
(the `zarrfs resize` command, tests); the node tree may pass one in (ZarrArray's
`metadata_writer=`)."""

from __future__ import annotations

from collections.abc import Callable

from ..formats.edit import METADATA_KEYS, resized_document
from ..grid import Index
from ..store import Store
from .geometry import Geometry


class StoredDocument:
    """Rewrites the array's own metadata document in its store."""

    def __init__(self, store: Store, geometry: Callable[[], Geometry]) -> None:
        self.store = store
        self.geometry = geometry

    def __call__(self, shape: Index) -> bytes:
        geometry = self.geometry()
        zarr_format = geometry.description.zarr_format
        key = METADATA_KEYS[zarr_format]
        stored = geometry.raw_metadata or self.store.get(key) or b""  # (opened from consolidated metadata)
        raw = resized_document(stored, zarr_format, shape)
        self.store.put(key, raw)
        return raw
