"""Reads from a store's driver, past any adapter over the store: what `Store.read`,
`read_ranges` and `read_many` come to, and what a disk cache (`disk_cache.DiskCachedStore`)
fetches for what it does not hold. Each runs under the store's deadline, retries and observer
(`BaseStore.call`).

Ranges of one object go in one batch where the driver batches them (`facets.Batches`: S3),
elsewhere one request each, all in flight at once on a remote store; whole objects in one
batch where the driver batches them (S3, Azure), elsewhere in turn."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from .base import BaseStore
from .observe import GET, GET_RANGE
from .ranges import ByteRange
from .values import Versioned

# Ranged reads of one object from drivers without batched requests (GCS, HTTP, references,
# Icechunk): each range its own request, these many in flight across the mount.
_RANGE_REQUESTS = ThreadPoolExecutor(32, thread_name_prefix="ranges")
ReadOne = Callable[[str, ByteRange], Versioned | None]  # (a key's range: `Store.read`, `fetch`)


def fetch(store: BaseStore, key: str, byte_range: ByteRange | None = None) -> Versioned | None:
    """`key` (or a range of it) and the generation it was read at (None: not stored)."""
    path = store.path(key)
    start, length = (None, None) if byte_range is None else (byte_range.start, byte_range.length)
    return store.call(key, lambda s: store.driver.read(s, path, start, length),
                      kind=GET if byte_range is None else GET_RANGE)


def fetch_ranges(store: BaseStore, key: str, ranges: Sequence[ByteRange],
                 each: ReadOne | None = None) -> list[Versioned] | None:
    """Byte ranges of `key` (None: not stored); `each`: what reads one range where they are
    not batched (`Store.read`, where no adapter asked for them; by default `fetch`)."""
    one = each or functools.partial(fetch, store)
    pairs = [(r.start, r.length) for r in ranges]
    batches = store.driver.batches() if len(ranges) > 1 else None
    batch = None if batches is None else batches.ranges(store.path(key), pairs, store.answers.mark)
    if batch is not None:
        return store.call(key, batch, kind=GET_RANGE, objects=len(pairs))
    if not store.capabilities.round_trips or len(ranges) <= 1:
        found = [one(key, byte_range) for byte_range in ranges]
    else:
        found = list(_RANGE_REQUESTS.map(lambda byte_range: one(key, byte_range), ranges))
    return None if any(piece is None for piece in found) else [p for p in found if p is not None]


def fetch_many(store: BaseStore, keys: Sequence[str],
               each: Callable[[str], Versioned | None] | None = None) -> list[Versioned | None]:
    """Whole objects (None: not stored); `each`: as `fetch_ranges`'s, for one object."""
    paths = [store.path(key) for key in keys]
    batches = store.driver.batches() if len(keys) > 1 else None
    batch = None if batches is None else batches.objects(paths, store.answers.mark)
    if batch is None:
        return [(each or functools.partial(fetch, store))(key) for key in keys]
    found = store.call(keys[0], batch, missing_ok=False, kind=GET, objects=len(keys))
    return found or []  # (missing objects are None in the list)
