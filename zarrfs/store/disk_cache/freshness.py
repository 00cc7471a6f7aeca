"""Which generation of an object a mount may serve from its disk cache (`DiskCacheFreshness`), under
the memory cache's close-to-open rules: what the store said at most as long ago as the last
recheck of the array holding it, checked a row of chunks at a time (`reads` has the whole
story)."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from ...errors import StoreError, ZarrfsError
from ..deadline import one_line
from ..listing import BLOCK, checked_with, first_chunk, numbered_row, row_of, rows_from
from ..outage import Outage
from ..settings import CHECK_SECONDS
from ..values import Described
from .cache import DiskCache

if TYPE_CHECKING:
    from ..core import Store

KNOWN_AT_MOST = 1 << 18  # objects whose current generation is remembered; past it, asked again
ROW_AT_MOST = 4096  # cached objects checked by one look at their row
SERVED_IN_A_ROW = 8  # reads served from the cache, none missed, that make its reads local
ROWS_AHEAD = 8  # rows of chunks checked at once: a row and the ones after it
STRIPES = 1 << 16  # counters of writes, by a hash of the path
_FIRST_LOOK = 16  # cached entries looked at for the first chunk of an array being opened
# Rows checked as an array is opened, beside the open's own check (a thread each).
_EARLY_CHECKS = ThreadPoolExecutor(2, thread_name_prefix="disk-cache-check")
log = logging.getLogger(__name__)


class DiskCacheFreshness:
    """What a mount knows of the generations of the objects it may read from a `DiskCache`."""

    def __init__(self, cache: DiskCache, store: str, known_generation: Callable[[str], str] | None) -> None:
        """`store`: what names the store among those sharing the cache; `known_generation`:
        the current generation of a path without a request, where the store knows it."""
        self.cache = cache
        self.store = store
        self.known_generation = known_generation
        self._lock = threading.Lock()
        self._tick = 0
        self._rechecked: dict[str, int] = {}  # store root -> the tick of its last recheck
        self._known: OrderedDict[str, tuple[str, int]] = OrderedDict()  # path -> generation, tick
        self._writes = [0] * STRIPES
        self._rows: dict[str, threading.Lock] = {}  # (rows being checked: one look each)
        self.outage = Outage("the disk cache's entries are")
        self._served_at = 0  # the tick of the last read the cache served
        self._served_in_a_row = 0  # reads the cache served since the last one it could not
        # A row checked ahead of a reader -> the rows checked with it (the last: where to go on)
        self._ahead_at: dict[str, tuple[str, ...]] = {}
        self._holds: dict[str, int] = {}  # an array's root -> the objects its grid may hold

    # -- which generation is current ---------------------------------------------------------

    def _current(self, store: Store, path: str) -> str | None:
        """The generation of `path` the cache may serve (None: fetch it from the store); while
        the store does not answer its checks (`outage`), the one cached last."""
        if self.known_generation is not None:
            with self._lock:
                written = self._writes[hash(path) % STRIPES] != 0
            if not written:
                return self.known_generation(path)
        with self._lock:
            known = self._valid(path)
            batch = None if known is None or not self._ahead_at else self._ahead_at.pop(row_of(path), None)
            for row in batch or ():
                self._ahead_at.pop(row, None)
        if batch is not None:  # (a reader entered rows checked ahead of it: check the next ones)
            _EARLY_CHECKS.submit(self._check_ahead, store, batch[-1])
        cached = self.cache.generations(self.store, path) if known is None else []
        if known is not None or not cached:
            return known
        if not self.outage.ongoing():
            with contextlib.suppress(StoreError):  # (`_ask`: the outage began)
                found = self._check_row(store, path)
                if found is not None or not self.outage.ongoing():  # (else: met while waiting)
                    return found
        return cached[0]

    def _valid(self, path: str) -> str | None:
        """The generation noted for `path` since the last recheck of any store holding it."""
        found = self._known.get(path)
        if found is None:
            return None
        generation, tick = found
        if self._rechecked.get("", 0) > tick:
            return None
        end = path.find("/")
        while end != -1:
            if self._rechecked.get(path[:end], 0) > tick:
                return None
            end = path.find("/", end + 1)
        return None if self._rechecked.get(path, 0) > tick else generation

    def _check_row(self, store: Store, path: str) -> str | None:
        """Ask the store about every cached object of `path`'s row of chunks (or its whole
        array, or its block: `checked_with`) in one listing, and about the rows after it
        beside (a reader going on reaches them next)."""
        row = self._checked_with(store, path)
        if row != f"{store.root}/" and numbered_row(row):
            _EARLY_CHECKS.submit(self._check_ahead, store, row)  # (listed while the row is)
        return self._check_rows(store, [row], path)

    def _checked_with(self, store: Store, path: str) -> str:
        with self._lock:
            return checked_with(path, store.root, self._holds.get(store.root))

    def _check_ahead(self, store: Store, last: str) -> None:
        """Check the ROWS_AHEAD rows after the row `last` before a reader gets there, and check
        the ones after those when it enters any of them (`_ahead_at`): a sequential reader
        waits for the listings of its first rows only, and a reader that stops costs a batch
        of rows more. Rows another thread is checking are left to it (never waited for: the
        threads of these checks serve every array)."""
        rows = rows_from(last, ROWS_AHEAD + 1)[1:]
        first = first_chunk(self.cache.entries_below(self.store, rows[0], 1)) if rows else None
        if first is None:
            return
        try:
            self._check_rows(store, rows, first, wait=False)
        except ZarrfsError as e:  # (the reader asks again, and sees what the store says)
            log.debug("disk cache: check of the rows after %s: %s", last, e)
            return
        with self._lock:
            batch = tuple(rows)
            for row in rows:
                self._ahead_at[row] = batch
            while len(self._ahead_at) > KNOWN_AT_MOST:
                self._ahead_at.pop(next(iter(self._ahead_at)))

    def _check_rows(self, store: Store, rows: list[str], path: str, *, wait: bool = True) -> str | None:
        """Ask the store about every cached object of `rows` in one look: the current
        generation of `path`. A row another thread is checking, or that was checked since
        the last recheck, is left out; but the first is waited for (`wait`). `rows`: rows of
        chunks ("a/c/5/"), a key alone, or a whole array listed at once (its root: "a/")."""
        with self._lock:
            locks = [self._rows.setdefault(row, threading.Lock()) for row in rows]
        taken = [row for row, lock in zip(rows, locks, strict=True)
                 if lock.acquire(blocking=wait and row == rows[0])]  # (others' rows: theirs to check)
        try:
            with self._lock:
                wanted = [row for row in taken if self._valid(row) is None]
            if wanted and not self.outage.ongoing():  # (a check this one waited for met it)
                self._ask(store, wanted)
            with self._lock:
                return self._valid(path)
        finally:
            with self._lock:
                for row, lock in zip(rows, locks, strict=True):
                    if row in taken:
                        if self._rows.get(row) is lock:
                            del self._rows[row]
                        lock.release()

    def _ask(self, store: Store, rows: list[str]) -> None:
        """Ask the store about the cached objects of `rows`; drop those of changed or deleted
        objects (what it says is noted by `Store.stats`: `learned`), and note the rows."""
        whole = rows == [f"{store.root}/"]
        block = rows[0].endswith(BLOCK)  # (a 1-D array's block, always alone: `checked_with`)
        dense = whole or block or numbered_row(rows[0])
        cached = [e for row in rows
                  for e in self.cache.entries_below(self.store, row.removesuffix(BLOCK), ROW_AT_MOST)
                  if dense or e[0] == row]
        below = store.root + "/" if store.root else ""
        keys = sorted({p[len(below):] for p, _ in cached if p.startswith(below)})
        tick = self.tick()
        prefix = rows[0][len(below) : -len(BLOCK)] if block else None
        try:
            checking = store.without_retries(CHECK_SECONDS)
            current = checking.stats(keys, dense=dense, whole=whole, prefix=prefix)
        except StoreError as e:
            self.outage.began(one_line(e))
            raise
        self.outage.ended()
        for cached_path, generation in cached:
            described = current.get(cached_path[len(below):])
            now = None if described is None else described[1]
            if now != generation:  # (changed or gone: its entries are of no more use)
                self.cache.drop(self.store, cached_path, keep=now)
        if dense:  # (a row listed vouches for the row: `_check_rows` leaves it out until a recheck)
            with self._lock:
                for row in rows:
                    self._note(row, "", tick)

    # -- what the mount learns and does ---------------------------------------------------------

    def tick(self) -> int:
        """Now, for `learned`: taken before the store is asked."""
        with self._lock:
            return self._tick

    def learned(self, store: Store, found: Mapping[str, Described], tick: int) -> None:
        """The store said, when asked at `tick`, what the generations of `found` are."""
        with self._lock:
            for key, described in found.items():
                path = store.path(key)
                if described is None or described[1] is None:
                    self._known.pop(path, None)
                else:
                    self._note(path, described[1], tick)

    def rechecking(self, store: Store, holds: int | None = None) -> None:
        """A close-to-open check of what is below `store` begins: what was known of it before
        must be asked again. When the cache serves reads (or the store is new to the mount),
        the rows of cached chunks a reader reaches first are asked about now, beside the
        check: their listings would otherwise wait for the first read. `holds`: how many
        objects the store may hold (an array's grid); when a listing's page holds them all,
        one listing checks them all."""
        with self._lock:
            before = self._rechecked.get(store.root)
            self._tick += 1
            self._rechecked[store.root] = self._tick
            reading = before is None or self._served_at >= before
            if holds is not None:  # (`checked_with`)
                self._holds[store.root] = holds
        if reading and self.known_generation is None:
            first = first_chunk(self.cache.entries_below(self.store, f"{store.root}/", _FIRST_LOOK))
            if first is not None:  # (its reads will most likely be served from the cache)
                self._served_in_a_row = max(self._served_in_a_row, SERVED_IN_A_ROW)
                _EARLY_CHECKS.submit(self._check_early, store, first)

    def _check_early(self, store: Store, path: str) -> None:
        """Check what a reader of the array reaches first, as the reader would (it asks
        again, and sees what the store says, should this fail)."""
        try:
            self._check_row(store, path)
        except ZarrfsError as e:
            log.debug("disk cache: early check of %s: %s", path, e)

    def changing(self, store: Store, key: str) -> None:
        """The mount writes or deletes `key` (called before and after): forget its generation,
        and keep nothing a read started before."""
        path = store.path(key)
        with self._lock:
            self._writes[hash(path) % STRIPES] += 1
            self._known.pop(path, None)

    def _note(self, path: str, generation: str, tick: int) -> None:
        old = self._known.get(path)
        if old is not None and old[1] > tick:
            return
        self._known[path] = (generation, tick)
        self._known.move_to_end(path)
        if len(self._known) > KNOWN_AT_MOST:
            self._known.popitem(last=False)
