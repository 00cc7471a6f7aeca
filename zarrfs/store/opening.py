"""A mount's store, composed: the store of its source (`Store.open`: the driver the source
maps to, under the store's deadline and retries), wrapped in the disk cache when one is asked
for and serves it (`disk_cache.DiskCachedStore`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .core import Store
from .disk_cache import DiskCachedStore, open_disk_cache
from .observe import StoreObserver
from .settings import SourceSettings


def open_store(source: str, storage_options: Mapping[str, Any] | None = None, *, read_only: bool = False,
               settings: SourceSettings | None = None, observer: StoreObserver | None = None,
               writable: bool = False, disk_cache: str | None = None, disk_cache_size: int = 0) -> Store:
    """The store of `source` (`Store.open`), its reads through the disk cache in the directory
    `disk_cache` (at most `disk_cache_size` bytes) where it serves the store: objects with
    generations, not local files (the store's `cached_on_disk` says whether it does).
    StoreError: the source cannot be opened; DiskCacheError: the directory cannot serve."""
    store = Store.open(source, storage_options, read_only=read_only, settings=settings, observer=observer,
                       writable=writable)
    if disk_cache is None:
        return store
    reads = open_disk_cache(store, source, storage_options or {}, disk_cache, disk_cache_size)
    return store if reads is None else DiskCachedStore(store, reads)
