"""Opening a mount's disk cache (`-o disk_cache=DIR`): which stores it serves, the name that
sets a store's entries apart from other stores' in a shared DIR, and, for Icechunk, the
snapshots an earlier mount's entries were read at."""

from __future__ import annotations

from ..core import Store
from ..settings import SourceOptions
from ..sources import endpoint
from .cache import DiskCache
from .reads import CachedReads

RESUMED_AT_MOST = 2  # earlier snapshots an Icechunk mount tries to diff from, at mount


def open_disk_cache(store: Store, source: str, options: SourceOptions, directory: str,
                    size: int) -> CachedReads | None:
    """The disk cache in `directory` for the reads of `store` (opened from `source` with
    `options`); None
    for a store it does not serve: local files, and stores whose reads have no generation
    (HTTP, reference sets, zip archives). DiskCacheError when the directory cannot serve."""
    capabilities, driver = store.capabilities, store.driver
    if capabilities.local_files or not capabilities.versioned:
        return None
    # Paths are the store's own; where they are not the whole location (Icechunk: keys of one
    # repository, root ""), the source names the store too.
    server = endpoint(source, options) or ""
    name = "|".join((driver.protocol, server, "" if store.root else source.rstrip("/")))
    versions = driver.versions() if capabilities.knows_generations else None
    known = None if versions is None else versions.known_generation
    reads = CachedReads(DiskCache(directory, size), name, known)
    if versions is not None:  # (Icechunk: what commits since an earlier mount left as it was)
        versions.resume(reads.cache.generations(name, None, RESUMED_AT_MOST))
    return reads
