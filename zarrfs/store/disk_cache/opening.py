"""Opening a mount's disk cache (`-o disk_cache=DIR`): which stores it serves, the name that
sets a store's entries apart from other stores' in a shared DIR, and, for Icechunk, the
snapshots an earlier mount's entries were read at."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core import Store
from ..sources import endpoint
from .cache import DiskCache
from .reads import CachedReads

RESUMED_AT_MOST = 2  # earlier snapshots an Icechunk mount tries to diff from, at mount


def open_disk_cache(store: Store, source: str, storage_options: Mapping[str, Any], directory: str,
                    size: int) -> CachedReads | None:
    """The disk cache in `directory` for the reads of `store` (opened from `source`); None
    for a store it does not serve: local files, and stores whose reads have no generation
    (HTTP, reference sets, zip archives). DiskCacheError when the directory cannot serve."""
    if store.capabilities.local_files or not store.versioned:
        return None
    protocols = store.fs.protocol if isinstance(store.fs.protocol, tuple | list) else (store.fs.protocol,)
    # Paths are the store's own; where they are not the whole location (Icechunk: keys of one
    # repository, root ""), the source names the store too.
    server = endpoint(source, storage_options) or ""
    name = "|".join((protocols[0], server, "" if store.root else source.rstrip("/")))
    known, resume = (getattr(store.fs, attribute, None) for attribute in ("known_generation", "resume"))
    reads = CachedReads(DiskCache(directory, size), name, known if callable(known) else None)
    if callable(resume):  # (Icechunk: what the commits since an earlier mount left as it was)
        resume(reads.cache.generations(name, None, RESUMED_AT_MOST))
    return reads
