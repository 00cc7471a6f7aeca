"""The store: a key/value layer over a backend's driver (`driver`, mapped from a source by
`sources`), with the deadline, retries, observer and writes of `base.BaseStore`, and the reads
that come in many: byte ranges, whole objects in a batch (from the driver: `fetches`), the
sizes of many keys (`many`). Whole nodes are deleted and moved by `prefixes`, over any store.
A source may be read through the store of another (an adapter's driver over it:
`driver.Adapter`, a zip archive's). A disk cache wraps a store as an adapter of the same
interface (`disk_cache.DiskCachedStore`; `opening.open_store` composes the two). What one
family does beside (a store of local files, one a disk cache serves) is a facet of the store,
None on the others (`facets`: `local_files`, `cached_on_disk`)."""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Iterable, Sequence
from typing import Any

from ..errors import ReadOnlyError
from . import fetches, many
from .base import BaseStore
from .capabilities import Capabilities
from .deadline import RetryPolicy, one_line
from .driver import ANY, Driver, Expect
from .facets import CachedOnDisk
from .observe import GET, GET_RANGE, StoreObserver
from .ranges import ByteRange, SuffixRange
from .settings import SourceOptions
from .sources import adapter_of, driver_for, open_source
from .values import Versioned, as_bytes

log = logging.getLogger(__name__)
__all__ = ["ANY", "ByteRange", "Capabilities", "Expect", "RetryPolicy", "Store", "SuffixRange", "one_line"]


class Store(BaseStore):
    def __init__(self, fs: Any, root: str, *, read_only: bool = False, retry: RetryPolicy | None = None,
                 observer: StoreObserver | None = None, driver: Driver | None = None,
                 answers: Any = None) -> None:
        """The store of `fs` below `root`, through `driver` (None: the one `sources.driver_for`
        maps `fs` to; given, it serves `fs`)."""
        super().__init__(root, driver or driver_for(fs, root.rstrip("/")), read_only=read_only,
                         retry=retry, observer=observer, answers=answers)

    @classmethod
    def open(cls, url: str, options: SourceOptions | None = None, *, read_only: bool = False,
             observer: StoreObserver | None = None, writable: bool = False) -> Store:
        """A store for a local path, an fsspec URL, a reference set, an Icechunk repository
        (see `sources`), or a source read through the store of another (`adapter_of`: a zip
        archive through the store of its directory; read-only, and `writable`, a caller that
        insists on writing, is refused), opened with `options` (None: the defaults)."""
        adapter = adapter_of(url)
        if adapter is not None and writable:
            raise ReadOnlyError(f"{adapter.kind} mounts are read-only: mount {url} without -o rw")
        source = open_source(url if adapter is None else adapter.below, options or SourceOptions(),
                             read_only=read_only or adapter is not None, writable=writable)
        store = cls(source.driver.fs, source.root, read_only=source.read_only, retry=source.retry,
                    observer=observer, driver=source.driver)
        if adapter is None:
            return store
        driver, root = adapter.over(store)
        # (what it reads through the store below is retried, and observed, there alone)
        return cls(driver.fs, root, read_only=True, retry=dataclasses.replace(store.retry, retries=False),
                   answers=store.answers, driver=driver)

    def prepare(self) -> None:
        """Make the clients the reads use now (a mount, before it serves), not at the first
        read; a fault is left to that read, which reports it."""
        try:
            self.driver.prepare(self.retry.deadline_seconds, self.root)
        except Exception as e:  # (whatever the clients raise: the first read meets it again)
            log.debug("could not prepare the clients of %s: %s", self.root, one_line(e))

    def child(self, path: str) -> Store:
        """The same store rooted at `path` below this one (an array inside a group)."""
        return self if not path else self.like(self.path(path), self.retry)

    def without_retries(self, within: float = math.inf) -> Store:
        """The same store, failing at the first fault within its deadline (or `within` seconds,
        when sooner): a check that may be skipped."""
        retry = dataclasses.replace(self.retry, retries=False,
                                    deadline_seconds=min(self.retry.deadline_seconds, within))
        return self.like(self.root, retry)

    def like(self, root: str, retry: RetryPolicy) -> Store:
        """This store at another root or with other retries (an adapter: wrapped again)."""
        return Store(self.driver.fs, root, read_only=self.read_only, retry=retry, observer=self.observer,
                     driver=self.driver, answers=self.answers)

    # What a disk cache offers beside its reads (`facets.CachedOnDisk`): None, none serves
    # this store (`disk_cache.DiskCachedStore` is one it serves).
    cached_on_disk: CachedOnDisk | None = None

    def close(self) -> None:
        """Let go of what the store keeps open between operations (a disk cache's index)."""

    # -- reads -------------------------------------------------------------------------------

    def get(self, key: str, byte_range: ByteRange | SuffixRange | None = None) -> bytes | None:
        if isinstance(byte_range, SuffixRange):  # (the last bytes: fewer in a shorter object)
            size = self.size(key)
            if size is None:
                return None
            byte_range = ByteRange(max(0, size - byte_range.length), min(size, byte_range.length))
        if self.capabilities.versioned:
            found = self.read(key, byte_range)
            return None if found is None else as_bytes(found.data)
        path = self.path(key)
        if byte_range is None:
            return self.call(key, lambda s: self.driver.cat(s, path), kind=GET)
        start, end = byte_range.start, byte_range.start + byte_range.length
        return self.call(key, lambda s: self.driver.cat(s, path, start, end), kind=GET_RANGE)

    def read(self, key: str, byte_range: ByteRange | None = None) -> Versioned | None:
        """The bytes and the generation they were read at, in one request where the store can
        (local files, object stores, Icechunk); elsewhere the generation is None."""
        return fetches.fetch(self, key, byte_range)

    def read_ranges(self, key: str, ranges: Sequence[ByteRange]) -> list[Versioned] | None:
        """Byte ranges of one object, each with the generation it was read at (None: `key`
        is not stored). Each range is one request under the store's deadline; on a remote
        store they are all in flight at once (each waits a round trip, not for the others):
        in one batch where the driver batches ranges (S3), elsewhere a thread each."""
        return fetches.fetch_ranges(self, key, ranges, each=self.read)

    def read_many(self, keys: Sequence[str], *,
                  unchecked: dict[str, str] | None = None) -> list[Versioned | None]:
        """Whole objects as `read` (None: not stored); in one batch under the store's deadline
        where the driver batches objects (S3, Azure: one wait and thread hop for the lot),
        elsewhere in turn. `unchecked`: see `DiskCachedStore.read_many` (here: left empty)."""
        return fetches.fetch_many(self, keys, each=self.read)

    # -- sizes and generations -----------------------------------------------------------

    def generation(self, key: str) -> str | None:
        """Which version of `key` is stored now (None: none)."""
        described = self.stat(key)
        return None if described is None else described[1]

    def generations(self, keys: Iterable[str], *, holds: int | None = None) -> dict[str, str | None]:
        """The generations of many keys, found as `stats` finds them: a recheck's question
        (close-to-open). `holds`: how many objects the store may hold, where known (an
        array's grid)."""
        return {key: None if found is None else found[1] for key, found in self.stats(keys).items()}

    def stats(self, keys: Iterable[str], *, dense: bool = False, whole: bool = False,
              prefix: str | None = None, by_rows: bool = False) -> dict[str, tuple[int, str | None] | None]:
        """The size and generation of many keys (None: not stored), at a cost in proportion to
        the keys, never to the store (`many.stats`). `dense`: the keys are most of what their
        directories may hold (every chunk of an array): one listing of them is cheapest.
        `whole`: what holds them holds no more than a listing's page (a small array).
        `prefix`: they all begin so, and few other keys do (one listing of them). `by_rows`:
        dense, and listed by their rows however few they are (rows known to be stored)."""
        return many.stats(self, list(keys), dense=dense, whole=whole, prefix=prefix, by_rows=by_rows)

    def size(self, key: str) -> int | None:
        return None if (described := self.stat(key)) is None else described[0]
