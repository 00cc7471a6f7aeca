"""The size and generation of many keys at once (`Store.stats`), at a cost in proportion to
the keys asked for, never to what the store holds.

- Local files: a stat each; or, for thousands of keys that are most of what their directories
  may hold (`dense`), one scan of each directory (`local.scans`).
- HTTP servers list nothing reliably: a request each, all at once.
- Object stores (`Capabilities.lists_prefixes`): a HEAD each, many at once, for the keys an access
  read (a close-to-open check asks for what a reader touched: a few hundred at most where it
  matters); past that, a listing of each deepest directory holding them, all at once. `dense` keys (runs of
  neighbouring chunks: data.tif's tiles as a reader reaches them) are listed by their key
  prefix, all at once: a row of chunks ("c/5/" or "c.5."), never the array. A listing costs a
  request per thousand entries, a HEAD a request per key: for a handful of keys in a
  directory of 10^5 chunks, HEADs are cheaper; for a row's keys, its listing. Keys of an
  array whose grid fits a listing's page (`whole`) are found in one listing of the array,
  and keys that share a `prefix` few others have (a block of a 1-D array) in one listing of it.
- Other drivers (Icechunk, references) list only a node: one listing of the store.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from . import listing
from .base import BaseStore
from .observe import LIST
from .values import Described, info_generation

# Local keys asked for one by one (a few ms: a page of a tile table); more, and dense: a scan.
STATS_ONE_BY_ONE = 1024
HEADS_AT_MOST = 512  # keys of an object store asked for one by one, at once; more: listings
KEYS_A_PREFIX_AT_LEAST = 4  # dense keys: listed by prefix when a listing answers for this many
_HEADS = ThreadPoolExecutor(32, thread_name_prefix="heads")  # (requests in flight at once)


def stats(store: BaseStore, wanted: Sequence[str], *, dense: bool, whole: bool = False,
          prefix: str | None = None, by_rows: bool = False) -> dict[str, Described]:
    object_store, local = store.capabilities.lists_prefixes, store.capabilities.local_files
    if by_rows and store.capabilities.lists and len(wanted) > 4:
        return _by_rows(store, wanted, object_store)
    if whole and object_store and store.capabilities.lists and wanted:
        return _listed(store, [(_directory_of(wanted), "")], wanted)
    if prefix is not None and object_store and store.capabilities.lists and len(wanted) > 1:
        directory, _, names = prefix.rpartition("/")
        return _listed(store, [(directory, names)], wanted)
    if len(wanted) <= 4 or (local and (not dense or len(wanted) <= STATS_ONE_BY_ONE)):
        return {key: store.stat(key) for key in wanted}
    if not store.capabilities.lists or (object_store and not dense and len(wanted) <= HEADS_AT_MOST):
        return dict(zip(wanted, _HEADS.map(store.stat, wanted), strict=True))
    if local or not object_store:
        return _by_rows(store, wanted, object_store)
    if dense:
        prefixes = sorted({listing.row_prefix(key) for key in wanted})
        if len(prefixes) * KEYS_A_PREFIX_AT_LEAST <= len(wanted):
            return _listed(store, prefixes, wanted)
        return dict(zip(wanted, _HEADS.map(store.stat, wanted), strict=True))
    return _listed(store, sorted({(os.path.dirname(key), "") for key in wanted}), wanted)


def _by_rows(store: BaseStore, wanted: Sequence[str], object_store: bool) -> dict[str, Described]:
    """One scan of each local directory holding them, a listing of each row of them on an
    object store, one listing of the store's node elsewhere (Icechunk, reference sets)."""
    if store.local_files is not None:
        scanned = store.local_files.scanned(wanted)
        return {key: scanned.get(key) for key in wanted}
    if not object_store:
        return _listed(store, [("", "")], wanted)
    return _listed(store, sorted({listing.row_prefix(key) for key in wanted}), wanted)


def _directory_of(keys: Sequence[str]) -> str:
    """The deepest directory holding every one of `keys` ("c/1/0", "c/12/3": "c")."""
    return os.path.commonpath([os.path.dirname(key) for key in keys])


def _listed(store: BaseStore, prefixes: Sequence[tuple[str, str]],
            wanted: Sequence[str]) -> dict[str, Described]:
    """What listings of `prefixes` (directory, and the prefix of names below it) say of
    `wanted`, all at once."""
    def listed(prefix: tuple[str, str]) -> dict[str, dict[str, Any]]:
        directory, names = prefix
        return store.call(directory, _finder(store, store.path(directory), names), kind=LIST) or {}

    found: dict[str, Described] = {}
    unsized: list[str] = []  # (a reference to a whole file: its listing has no size)
    for entries in _HEADS.map(listed, prefixes):
        for path, info in entries.items():
            if info.get("size") is None:
                unsized.append(store.key_of(path))
            else:
                found[store.key_of(path)] = (int(info["size"]), info_generation(info))
    asked = set(wanted)
    sized_apart = [key for key in unsized if key in asked]
    found.update(zip(sized_apart, _HEADS.map(store.stat, sized_apart), strict=True))
    return {key: found.get(key) for key in wanted}


def _finder(store: BaseStore, base: str, prefix: str) -> Callable[[float | None], dict[str, dict[str, Any]]]:
    return lambda seconds: store.driver.listed(seconds, base, prefix)
