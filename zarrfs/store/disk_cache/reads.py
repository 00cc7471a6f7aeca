"""A mount's reads through the disk cache (`disk_cache.DiskCache`): which generation of an
object the mount may serve from it, under the memory cache's close-to-open rules.

An entry is named by the generation its bytes were read at, so the question is only which
generation of an object is current:

- Icechunk: the snapshot a key last changed in, known without a request (`known_generation`):
  an entry of it is never checked. A mount at a newer snapshot than the entries' diffs the two
  once (`resume`), and keeps the older generation for what the commits since left as it was.
- Other stores: what the store said, at most as long ago as the last recheck of the array
  holding the object (`rechecking`: the close-to-open check of an open). The answers the
  mount gets anyway, to its rechecks and its reads, are noted (`learned`); an object asked
  about by nothing since is checked with the other cached objects of its row of chunks, in
  one listing (`Store.stats(dense=True)`): a warm restart costs a listing per row, not a
  request per object; an array whose grid a listing's page holds (`listing.ONE_LISTING`), one
  listing; a chunk of a larger 1-D array (no rows), one listing for its block of a hundred.

A put or delete through the mount forgets what it knew of the object, and a read that began
before a write to it keeps nothing: nothing stale is served after the mount's own write."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

from ...errors import StoreError, ZarrfsError
from ..deadline import one_line
from ..listing import BLOCK, checked_with, first_chunk, numbered_row, row_of, rows_from
from ..outage import Outage
from ..ranges import ByteRange
from ..settings import CHECK_SECONDS
from ..values import Buffer, Versioned
from .cache import DiskCache, entry_name

if TYPE_CHECKING:
    from ..core import Store

FetchRanges = Callable[[str, Sequence[ByteRange]], "list[Versioned] | None"]
FetchMany = Callable[[Sequence[str]], "list[Versioned | None]"]
Described = tuple[int, str | None] | None
KNOWN_AT_MOST = 1 << 18  # objects whose current generation is remembered; past it, asked again
ROW_AT_MOST = 4096  # cached objects checked by one look at their row
SERVED_IN_A_ROW = 8  # reads served from the cache, none missed, that make its reads local
ROWS_AHEAD = 8  # rows of chunks checked at once: a row and the ones after it
_STRIPES = 1 << 16  # counters of writes, by a hash of the path
_FIRST_LOOK = 16  # cached entries looked at for the first chunk of an array being opened
# Rows checked as an array is opened, beside the open's own check (a thread each).
_EARLY_CHECKS = ThreadPoolExecutor(2, thread_name_prefix="disk-cache-check")
_CONFIRMS = ThreadPoolExecutor(4, thread_name_prefix="disk-cache-confirm")  # (`confirm`)
log = logging.getLogger(__name__)


class CachedReads:
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
        self._writes = [0] * _STRIPES
        self._rows: dict[str, threading.Lock] = {}  # (rows being checked: one look each)
        self.outage = Outage("the disk cache's entries are")
        self._served_at = 0  # the tick of the last read the cache served
        self._served_in_a_row = 0  # reads the cache served since the last one it could not
        # A row checked ahead of a reader -> the rows checked with it (the last: where to go on)
        self._ahead_at: dict[str, tuple[str, ...]] = {}
        self._holds: dict[str, int] = {}  # an array's root -> the objects its grid may hold

    # -- reads ---------------------------------------------------------------------------------

    def read_ranges(self, store: Store, key: str, ranges: Sequence[ByteRange],
                    fetch: FetchRanges) -> list[Versioned] | None:
        """Byte ranges of `key`: those cached, and the others fetched at once and kept."""
        path = store.path(key)
        generation = self._current(store, path)
        found: list[Versioned | None] = [None] * len(ranges)
        if generation is not None:
            for i, r in enumerate(ranges):
                data = self._load(path, r.start, r.length, generation)
                found[i] = None if data is None else Versioned(data, generation)
        wanted = [i for i, piece in enumerate(found) if piece is None]
        if wanted:
            for _ in wanted:
                self._missed()
            before = self._before(path)
            fetched = fetch(key, [ranges[i] for i in wanted])
            if fetched is None:
                return None
            for i, piece in zip(wanted, fetched, strict=True):
                found[i] = piece
                self._keep(path, ranges[i].start, ranges[i].length, piece, before)
        return [piece for piece in found if piece is not None]

    def read_many(self, store: Store, keys: Sequence[str], fetch: FetchMany,
                  unchecked: dict[str, str] | None = None) -> list[Versioned | None]:
        """Whole objects: those cached, and the others fetched at once and kept. `unchecked`
        (given): an object whose row is being checked is not waited for but read at the
        generation cached, and put in `unchecked` with it (see `confirm`)."""
        found: list[Versioned | None] = [None] * len(keys)
        for i, key in enumerate(keys):
            path = store.path(key)
            early = None if unchecked is None else self._early(store, path)
            generation = early or self._current(store, path)
            data = None if generation is None else self._load(path, 0, -1, generation)
            found[i] = None if data is None or generation is None else Versioned(data, generation)
            if early is not None and data is not None and unchecked is not None:
                unchecked[key] = early
        wanted = [i for i, piece in enumerate(found) if piece is None]
        if wanted:
            befores = [self._before(store.path(keys[i])) for i in wanted]
            for _ in wanted:
                self._missed()
            for i, piece, before in zip(wanted, fetch([keys[i] for i in wanted]), befores, strict=True):
                found[i] = piece
                if piece is not None:
                    self._keep(store.path(keys[i]), 0, -1, piece, before)
        return found

    def confirm(self, store: Store, unchecked: Mapping[str, str]) -> Future[set[str]]:
        """Whether the objects `read_many` read before their rows' checks answered were
        current (`unchecked`: key -> generation read): the keys of those that were not, once
        the checks answer (a check that fails: its error). Asked on threads of its own, so a
        loader thread goes on decoding while the checks are under way."""
        def stale() -> set[str]:
            return {key for key, read in unchecked.items() if self._current(store, store.path(key)) != read}
        return _CONFIRMS.submit(stale)

    def _early(self, store: Store, path: str) -> str | None:
        """The generation of `path` last cached, when its row is being checked now and nothing
        newer is known: what a read may begin with, to be confirmed when the check answers."""
        if self.known_generation is not None:
            return None
        row = self._checked_with(store, path)
        with self._lock:
            if self._valid(path) is not None or row not in self._rows:
                return None
        cached = self.cache.generations(self.store, path)
        return cached[0] if cached else None

    def whole(self, store: Store, key: str) -> tuple[int, str] | None:
        """The size and generation of `key` where the cache holds it whole at the generation
        the mount may serve now (None: it would be fetched)."""
        path = store.path(key)
        generation = self._current(store, path)
        size = None if generation is None else self.cache.length(
            entry_name(self.store, path, 0, -1, generation))
        return None if size is None or generation is None else (size, generation)

    def _load(self, path: str, start: int, length: int, generation: str) -> Buffer | None:
        data = self.cache.load(entry_name(self.store, path, start, length, generation))
        if data is None and length >= 0:  # (a range of an object cached whole: read alone)
            data = self.cache.load(entry_name(self.store, path, 0, -1, generation), start, length)
        if data is not None:  # (plain stores of ints: no lock)
            self._served_at = self._tick
            self._served_in_a_row += 1
        return data

    def served_locally(self) -> bool:
        """Whether the latest reads were all served from the cache (no wait on the store)."""
        return self._served_in_a_row >= SERVED_IN_A_ROW

    def _missed(self) -> None:
        self._served_in_a_row = 0
        self.cache.missed()

    def _before(self, path: str) -> tuple[int, int]:
        """What a fetch of `path` starts from: the tick, and the writes to the path so far."""
        with self._lock:
            return self._tick, self._writes[hash(path) % _STRIPES]

    def _keep(self, path: str, start: int, length: int, fetched: Versioned, before: tuple[int, int]) -> None:
        """Keep what a fetch read, unless the mount wrote the object meanwhile."""
        tick, writes = before
        if fetched.generation is None:
            return
        with self._lock:
            if self._writes[hash(path) % _STRIPES] != writes:
                return
            self._note(path, fetched.generation, tick)
        name = entry_name(self.store, path, start, length, fetched.generation)
        self.cache.save(name, self.store, path, fetched.generation, fetched.data)

    # -- which generation is current ---------------------------------------------------------

    def _current(self, store: Store, path: str) -> str | None:
        """The generation of `path` the cache may serve (None: fetch it from the store); while
        the store does not answer its checks (`outage`), the one cached last."""
        if self.known_generation is not None:
            with self._lock:
                written = self._writes[hash(path) % _STRIPES] != 0
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
            self._writes[hash(path) % _STRIPES] += 1
            self._known.pop(path, None)

    def _note(self, path: str, generation: str, tick: int) -> None:
        old = self._known.get(path)
        if old is not None and old[1] > tick:
            return
        self._known[path] = (generation, tick)
        self._known.move_to_end(path)
        if len(self._known) > KNOWN_AT_MOST:
            self._known.popitem(last=False)

    def stats(self) -> dict[str, float]:
        """`zarrfs stats`: hits and misses of this mount, bytes in the cache (of every mount)."""
        return {"disk_cache_hits": self.cache.hits, "disk_cache_misses": self.cache.misses,
                "disk_cache_bytes": self.cache.cached_bytes()}

