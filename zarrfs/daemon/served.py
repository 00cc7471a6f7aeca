"""The steps of what a mount or a server serves, from the store to its end (each called by
`lifecycle` alone, in its order): the decoding processes, the store, the cache and threads the
arrays share, the tree of what the store holds, and everything dirty written back once it
stops."""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable, Iterator

from ..array import DecodePool, Drop, ForkServer, Shared
from ..errors import MetadataError, ZarrfsError
from ..formats import discover
from ..options import TreeOptions
from ..store import Store, open_store
from ..store.observe import StoreObserver
from ..tree import Tree, tree_of
from ..views.array_dir import ViewSettings
from .privileges import Identity

log = logging.getLogger("zarrfs")

FINAL_FLUSH_SECONDS = 60.0
REMOTE_THREADS = 32  # loader threads of a remote store: requests in flight (20 ms cold dd: 16 < 32 > 48)


@contextlib.contextmanager
def decoding(identity: Identity | None) -> Iterator[DecodePool | None]:
    """The decoding processes, from a fork server forked now, while the daemon has one
    thread (None when it has more: chunks are then decoded in the daemon); stopped at the end.
    glibc's malloc bounded first (`memory.bound_malloc`), for the workers too."""
    drop = None if identity is None else Drop(identity.uid, identity.gid, identity.groups)
    server = ForkServer.start(drop)
    if server is None:
        log.debug("no decoding processes: the daemon runs threads already")
        yield None
        return
    pool = DecodePool(server, len(os.sched_getaffinity(0)))
    try:
        yield pool
    finally:
        pool.close()


def opened_store(source: str, options: TreeOptions, observer: StoreObserver | None) -> Store:
    """The store of `source` as the options say (ZarrfsError: it cannot be opened), to be
    closed at the end, then prepared (`Store.prepare`)."""
    return open_store(source, options.source, read_only=options.read_only, writable=options.read_write,
                      observer=observer)


def shared_of(store: Store, options: TreeOptions, decoders: DecodePool | None,
              give_back: Callable[[], int] | None) -> Shared:
    """The cache, loader threads and decoding processes every array of the tree shares."""
    # A remote store's reads wait on the network, not the CPU: keep more of them in flight.
    # ... but no more at once than cores while its disk cache serves them (`LoaderPool`).
    cached = store.cached_on_disk
    served_locally = cached.served_locally if cached is not None and not options.threads else None
    threads = options.threads or (REMOTE_THREADS if store.capabilities.round_trips else None)
    shared = Shared(options.cache_bytes, threads,
                    fill_missing_reads=options.fill_missing_data_reads,
                    store_fill_chunks=options.store_data_equal_to_fill_value, served_locally=served_locally,
                    decoders=decoders, give_back=give_back)
    if cached is not None:
        shared.more_stats.append(cached.stats)
    return shared


def open_tree(store: Store, shared: Shared, view_settings: ViewSettings, *, rechecks: bool = False) -> Tree:
    """The tree of what `store` holds. An array at the root must open, or the mount fails."""
    root = discover(store.get, "")
    if root is None:
        raise MetadataError("zarr.json", "not found (nor .zarray / .zgroup / meta): no Zarr array or group")
    tree = tree_of(store, root, shared, view_settings, rechecks=rechecks)  # (with .versions/: Icechunk)
    if not store.read_only and not store.capabilities.conditional:
        log.warning("%s cannot write conditionally: writers other than this mount are not "
                    "coordinated (concurrent writes to one chunk may overwrite each other)", store.path(""))
    if root.kind == "array":
        opened = tree.open_array("")
        if opened.problem is not None and opened.strings is None:  # (strings: their own files)
            raise ZarrfsError(opened.problem)
    return tree


def final_flush(tree: Tree) -> bool:
    """Write back everything dirty, retrying while the store is failing."""
    deadline = time.monotonic() + FINAL_FLUSH_SECONDS
    delay = 0.5
    while True:
        try:
            for array in tree.opened_arrays():
                array.flush()
            return True
        except (OSError, ZarrfsError) as e:
            if time.monotonic() + delay > deadline:
                log.error("gave up writing %d dirty bytes back: %s", tree.shared.cache.dirty_bytes, e)
                return False
            log.warning("write-back failed (%s); retrying in %.1f s", e, delay)
            time.sleep(delay)
            delay = min(delay * 2, 10.0)
        except Exception:
            # A bug, not a store fault: say so, and still close the session, the tree and the
            # watchdog (the caller does, once this returns).
            log.exception("write-back failed; %d dirty bytes not written", tree.shared.cache.dirty_bytes)
            return False


def remove_temporaries(store: Store) -> None:
    try:
        removed = 0 if store.local_files is None else store.local_files.remove_stale_temporaries()
    except OSError as e:
        log.warning("could not look for stale temporary files: %s", e)
        return
    if removed:
        log.info("removed %d temporary files left by an interrupted write", removed)
