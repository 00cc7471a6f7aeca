"""A mount's store, composed: the store of its source (`Store.open`: the driver the source
maps to, under the store's deadline and retries), wrapped in the disk cache when one is asked
for and serves it (`disk_cache.DiskCachedStore`); and the store's mount options, composed from
those the store, each of its families and the disk cache declare."""

from __future__ import annotations

import logging
from typing import Any

from ..declared import Option
from .core import Store
from .disk_cache import DISK_CACHE, DISK_CACHE_SIZE, DiskCachedStore, open_disk_cache
from .disk_cache import OPTIONS as DISK_CACHE_OPTIONS
from .observe import StoreObserver
from .settings import SourceOptions
from .sources import OPTIONS as SOURCE_OPTIONS

__all__ = ["OPTIONS", "open_store"]

log = logging.getLogger(__name__)
OPTIONS: tuple[Option[Any], ...] = (*SOURCE_OPTIONS, *DISK_CACHE_OPTIONS)


def open_store(source: str, options: SourceOptions, *, read_only: bool = False, writable: bool = False,
               observer: StoreObserver | None = None) -> Store:
    """The store of `source` opened with `options` (`Store.open`), its reads through the disk
    cache in the directory `-o disk_cache=` names where it serves the store: objects with
    generations, not local files (the store's `cached_on_disk` says whether it does).
    StoreError: the source cannot be opened; DiskCacheError: the directory cannot serve."""
    store = Store.open(source, options, read_only=read_only, observer=observer, writable=writable)
    directory = options.given[DISK_CACHE]
    if directory is None:
        return store
    reads = open_disk_cache(store, source, options, directory, options.given[DISK_CACHE_SIZE])
    if reads is None:
        log.warning("%s is not cached on disk (-o disk_cache serves S3, GCS, Azure and Icechunk)",
                    store.path(""))
        return store
    return DiskCachedStore(store, reads)
