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

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

from ..ranges import ByteRange
from ..values import Buffer, Opened, Versioned
from .cache import entry_name
from .freshness import SERVED_IN_A_ROW, STRIPES, DiskCacheFreshness

if TYPE_CHECKING:
    from ..core import Store

FetchRanges = Callable[[str, Sequence[ByteRange]], "list[Versioned] | None"]
FetchMany = Callable[[Sequence[str]], "list[Versioned | None]"]
_CONFIRMS = ThreadPoolExecutor(4, thread_name_prefix="disk-cache-confirm")  # (`confirm`)


class CachedReads(DiskCacheFreshness):
    """A mount's reads through a `DiskCache`: those it may serve from it, and the others
    fetched and kept."""

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
            generation, early = self._serving(store, path, unchecked is not None)
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

    def open_many(self, store: Store, keys: Sequence[str],
                  unchecked: dict[str, str] | None = None) -> dict[str, Opened]:
        """The entries of those of `keys` the cache holds whole at the generation the mount
        may serve, opened for a reader elsewhere (a decoding process: the daemon reads none
        of their bytes); `unchecked` as `read_many`'s. The others are left out, for
        `read_many` (which counts them as misses)."""
        found: dict[str, Opened] = {}
        for key in keys:
            path = store.path(key)
            generation, early = self._serving(store, path, unchecked is not None)
            opened = None if generation is None else self.cache.open(
                entry_name(self.store, path, 0, -1, generation), generation)
            if opened is None:
                continue
            self._served()
            found[key] = opened
            if early is not None and unchecked is not None:
                unchecked[key] = early
        return found

    def _serving(self, store: Store, path: str, early: bool) -> tuple[str | None, str | None]:
        """The generation of `path` a read may serve from the cache (None: fetch it), and,
        `early`, the one it was read at early (`_early`), if it was."""
        found = self._early(store, path) if early else None
        return found or self._current(store, path), found

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
        if data is not None:
            self._served()
        return data

    def _served(self) -> None:
        """A read the cache served (plain stores of ints: no lock)."""
        self._served_at = self._tick
        self._served_in_a_row += 1

    def served_locally(self) -> bool:
        """Whether the latest reads were all served from the cache (no wait on the store)."""
        return self._served_in_a_row >= SERVED_IN_A_ROW

    def _missed(self) -> None:
        self._served_in_a_row = 0
        self.cache.missed()

    def _before(self, path: str) -> tuple[int, int]:
        """What a fetch of `path` starts from: the tick, and the writes to the path so far."""
        with self._lock:
            return self._tick, self._writes[hash(path) % STRIPES]

    def _keep(self, path: str, start: int, length: int, fetched: Versioned, before: tuple[int, int]) -> None:
        """Keep what a fetch read, unless the mount wrote the object meanwhile."""
        tick, writes = before
        if fetched.generation is None:
            return
        with self._lock:
            if self._writes[hash(path) % STRIPES] != writes:
                return
            self._note(path, fetched.generation, tick)
        name = entry_name(self.store, path, start, length, fetched.generation)
        self.cache.save(name, self.store, path, fetched.generation, fetched.data)

    def stats(self) -> dict[str, float]:
        """`zarrfs stats`: hits and misses of this mount, bytes in the cache (of every mount)."""
        return {"disk_cache_hits": self.cache.hits, "disk_cache_misses": self.cache.misses,
                "disk_cache_bytes": self.cache.cached_bytes()}

