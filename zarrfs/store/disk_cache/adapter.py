"""The disk cache as an adapter: a store whose reads go through a mount's `CachedReads`, with
the same interface as the store it wraps (as fsspec's caching filesystem wraps any other, and
TensorStore's adapters wrap a driver). What it fetches it fetches from the wrapped store's
driver (`fetches`); what the store says of generations, to its rechecks and stats, it
notes; a write through it forgets what it knew of the object. What is asked of a disk cache
beside reads is its facet (`Store.cached_on_disk`: `Entries`), and it closes the cache's index."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future

from ..core import Store
from ..deadline import RetryPolicy
from ..driver import ANY, Expect
from ..facets import CachedOnDisk
from ..fetches import fetch_many, fetch_ranges
from ..ranges import ByteRange
from ..values import Opened, Payload, Versioned
from .reads import CachedReads


class DiskCachedStore(Store):
    def __init__(self, store: Store, reads: CachedReads) -> None:
        super().__init__(store.driver.fs, store.root, read_only=store.read_only, retry=store.retry,
                         observer=store.observer, driver=store.driver, answers=store.answers)
        self.disk_cache = reads  # (-o disk_cache: reads kept on local disk)
        self.cached_on_disk: CachedOnDisk | None = Entries(self, reads)

    def like(self, root: str, retry: RetryPolicy) -> Store:
        return DiskCachedStore(super().like(root, retry), self.disk_cache)

    def close(self) -> None:
        """Close the disk cache's index (shared by every store made `like` this one)."""
        self.disk_cache.cache.close()

    def read(self, key: str, byte_range: ByteRange | None = None) -> Versioned | None:
        if byte_range is None:  # (one object, or one range of it, as the disk cache serves many)
            return self.read_many([key])[0]
        found = self.read_ranges(key, [byte_range])
        return None if found is None else found[0]

    def read_ranges(self, key: str, ranges: Sequence[ByteRange]) -> list[Versioned] | None:
        return self.disk_cache.read_ranges(self, key, ranges, functools.partial(fetch_ranges, self))

    def read_many(self, keys: Sequence[str], *,
                  unchecked: dict[str, str] | None = None) -> list[Versioned | None]:
        """`Store.read_many`. `unchecked` (given): objects the disk cache holds whose
        close-to-open check is under way are read without waiting for it; their keys and
        generations are put in it, and nothing made of them may be served before `confirm`
        says they were current."""
        return self.disk_cache.read_many(self, keys, functools.partial(fetch_many, self), unchecked)

    def generations(self, keys: Iterable[str], *, holds: int | None = None) -> dict[str, str | None]:
        """`Store.generations`, after which the disk cache trusts nothing below this store it
        knew before."""
        self.disk_cache.rechecking(self, holds)
        return super().generations(keys, holds=holds)

    def stats(self, keys: Iterable[str], *, dense: bool = False, whole: bool = False,
              prefix: str | None = None, by_rows: bool = False) -> dict[str, tuple[int, str | None] | None]:
        tick = self.disk_cache.tick()
        found = super().stats(keys, dense=dense, whole=whole, prefix=prefix, by_rows=by_rows)
        self.disk_cache.learned(self, found, tick)
        return found

    def stat(self, key: str) -> tuple[int, str | None] | None:
        tick = self.disk_cache.tick()
        found = super().stat(key)
        self.disk_cache.learned(self, {key: found}, tick)
        return found

    def put(self, key: str, data: Payload, *, sync_directory: bool = True,
            expect: Expect = ANY) -> str | None:
        self.check_writable(key)
        self.disk_cache.changing(self, key)  # (nothing read before the write is kept, nor after)
        try:
            return super().put(key, data, sync_directory=sync_directory, expect=expect)
        finally:
            self.disk_cache.changing(self, key)

    def delete(self, key: str, *, expect: Expect = ANY) -> None:
        self.check_writable(key)
        self.disk_cache.changing(self, key)
        try:
            super().delete(key, expect=expect)
        finally:
            self.disk_cache.changing(self, key)


class Entries:
    """What the disk cache of `store` offers beside its reads (`facets.CachedOnDisk`)."""

    def __init__(self, store: DiskCachedStore, reads: CachedReads) -> None:
        self.store = store
        self.reads = reads

    def served_locally(self) -> bool:
        return self.reads.served_locally()

    def stats(self) -> dict[str, float]:
        return self.reads.stats()

    def open(self, keys: Sequence[str], *, unchecked: dict[str, str] | None = None) -> dict[str, Opened]:
        return self.reads.open_many(self.store, keys, unchecked)

    def whole(self, key: str) -> tuple[int, str] | None:
        return self.reads.whole(self.store, key)

    def confirm(self, unchecked: Mapping[str, str]) -> Future[set[str]]:
        if unchecked:
            return self.reads.confirm(self.store, unchecked)
        answered: Future[set[str]] = Future()
        answered.set_result(set())
        return answered
