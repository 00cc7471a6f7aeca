"""What a mount serves, from the store to its end: the tree of what the store holds, opened
before the mount serves, and everything dirty written back once it stops."""

from __future__ import annotations

import logging
import time

from ..array import Shared
from ..errors import MetadataError, ZarrfsError
from ..formats import discover
from ..store import Store
from ..tree import Tree, tree_of
from ..views.array_dir import Layout

log = logging.getLogger("zarrfs")

FINAL_FLUSH_SECONDS = 60.0


def open_tree(store: Store, shared: Shared, layout: Layout, *, rechecks: bool = False) -> Tree:
    """The tree of what `store` holds. An array at the root must open, or the mount fails."""
    root = discover(store.get, "")
    if root is None:
        raise MetadataError("zarr.json", "not found (nor .zarray / .zgroup / meta): no Zarr array or group")
    tree = tree_of(store, root, shared, layout, rechecks=rechecks)  # (with .versions/: Icechunk)
    if not store.read_only and not store.conditional:
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
        removed = store.remove_stale_temporaries()
    except OSError as e:
        log.warning("could not look for stale temporary files: %s", e)
        return
    if removed:
        log.info("removed %d temporary files left by an interrupted write", removed)
