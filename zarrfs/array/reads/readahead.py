"""Reading ahead of one open file's sequential reader.

A flat C-order file of the whole array (`data`, `data.npy` after its header, a variable of
`data.nc`) is, slab by slab, a run of whole rows of the array: rows of read chunks. While a
reader goes forward, the next slabs are decoded on the loader threads straight into buffers in
file order (zarrfs.array.reads.streaming; in the file's byte order, swapped as chunks are copied in),
so a request inside a finished slab is answered with a slice of it, at once and without
copying. A slab is used only while no element of the array changed since it began (any
write, through any view, makes it stale).

Where a row of chunks is larger than a slab may be, slabs are bands of its rows
(zarrfs.array.reads.slab_layout). Files that are not such runs (chunk files, arrays whose rows
are too large to hold even one) read ahead the old way: the chunks ahead are loaded into the
cache.

`ready` is called on the event loop and `read` on worker threads, several at once: every
field that changes is read and written under the one lock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import NamedTuple, Protocol, runtime_checkable

from .slab_layout import Rows, SlabLayout, slab_layout

# (3: while a reader drains one slab, the decoding processes fill the next ones; with 2 they
# waited for work a fifth of a cold read of zstd chunks: docs/performance-history.md, issue 77)
SLABS_AHEAD = 3

# What is read ahead from a remote store is priced in requests (zarrfs.array.reads.readahead_cost),
# from a local one in bytes (slabs, PREFETCH_BYTES: a request is a local read): a reader earns a
# budget by reading in order, at least STREAK_BYTES, the kernel's window included (a random
# reader that lands near its last read must not start anything), then twice what its read
# cost, at least FIRST_AHEAD_REQUESTS, doubling with each read in order; a read out of order
# spends it all (as the kernel's window and mountpoint-s3's prefetcher: a reader that asked
# for 16 KiB never waits for megabytes nobody asked for). Slabs ahead of the reader's start
# while the requests they cost fit in the budget; the cache-filling way loads a window ahead
# that starts at a few times the reader's request and doubles up to PREFETCH_BYTES, cut to
# what the budget pays for.
FIRST_AHEAD_REQUESTS = 64
UNBOUNDED = 1 << 40
PREFETCH_BYTES = 32 << 20
FIRST_WINDOW_REQUESTS = 4
# A read counts as sequential when it starts near where the previous one ended; the kernel's
# readahead sends several requests at once, so they arrive slightly out of order.
SEQUENTIAL_SLACK = 4 << 20
STREAK_BYTES = 1 << 20


class Slab(Protocol):
    """A buffer being filled with rows of the array in file order (`zarrfs.array.reads.streaming.
    Stream`, or a view of one that changes its bytes before they are served)."""

    @property
    def done(self) -> bool: ...

    @property
    def current(self) -> bool:
        """Done without error, and no element of the array changed since it began."""

    def wait(self) -> bool:
        """Wait until done; whether it is current."""

    def piece(self, start: int, stop: int) -> memoryview | None: ...
    def close(self) -> None: ...

    def pin(self) -> bool:
        """Keep the buffer the slab's until `unpin`, closed or not (what `piece` gave stays its
        bytes); False when closed."""

    def unpin(self) -> None: ...


class Ahead(NamedTuple):
    """A slab started ahead of the reader, where it lies in the file: `size` bytes from `offset`."""

    offset: int
    size: int
    slab: Slab


class Reader(Protocol):
    """What the reader sees (a `zarrfs.views.FileView`)."""

    def read(self, offset: int, size: int) -> bytes | memoryview: ...
    def prefetch(self, offset: int, size: int) -> None: ...


class Reading(Protocol):
    """How one open file is read: `ready` answers without blocking when it can (in the fuse
    layer's own thread), `read` may wait (in a worker). What `ready` gives is good until the
    thread's next call (it may be a view of a buffer lent again): reply with it first."""

    def ready(self, offset: int, size: int) -> bytes | memoryview | None: ...
    def read(self, offset: int, size: int) -> bytes | memoryview: ...
    def close(self) -> None: ...


@runtime_checkable
class Streaming(Reading, Protocol):
    """A reading whose slabs may go into the page cache before the reader asks for them."""

    @property
    def reader_end(self) -> int:
        """Where the furthest read so far ended."""

    def take_ahead(self) -> list[Ahead]:
        """The slabs started ahead of the reader since the last call."""


class RowFile(Rows, Protocol):
    """The flat file of an array, as rows (a `zarrfs.views.RegionFile`)."""

    def requests(self, offset: int, size: int) -> int: ...
    def stream_rows(self, first: int, stop: int) -> Slab | None: ...
    def cached(self, offset: int, size: int) -> bool: ...


class Readahead:
    """The reading ahead of one open file: `ready` answers from finished slabs without
    blocking, `read` waits for a slab in progress or reads through the cache."""

    def __init__(self, view: Reader, data: RowFile, skip: Callable[[], int] = lambda: 0,
                 prefetch_bytes: int = PREFETCH_BYTES) -> None:
        self._view = view  # what the reader sees
        self._data = data  # the flat file of the array inside it, after `skip()` bytes
        self._skip = skip
        self._prefetch_bytes = prefetch_bytes
        self._lock = threading.Lock()
        self._slabs: dict[int, Slab] = {}
        self._last_end: int | None = None  # (None: nothing read yet)
        self._streak = 0  # bytes read in order, up to the last read
        self._window = 0  # what the cache-filling way loads ahead of the reader now
        self._budget = 0  # the requests reading ahead may cost now
        self._through: list[int] = []  # where reads through the cache in progress end
        self._prefetched_to = 0
        self._ahead: list[Ahead] = []  # (slabs started ahead of the reader, not yet taken)
        self._furthest = 0

    def ready(self, offset: int, size: int) -> bytes | memoryview | None:
        """The bytes, when finished, current slabs hold all of them (never blocks)."""
        layout = self._layout()
        found = self._slabs_for(layout, offset, size)
        if not found or not all(stream.current for stream, _, _ in found):
            return None
        self._advance(layout, offset, size)
        return _join(found)  # (None when a slab was closed meanwhile: `read` reads it)

    def read(self, offset: int, size: int) -> bytes | memoryview:
        """The bytes, from slabs (waiting for them to finish) or read through the cache.

        Bytes the cache holds are never made to wait for a slab still being filled: a slab
        spans whole rows of chunks, some of which may wait on the store (for its whole
        timeout, when it has stopped answering), and its jobs queue on the loader threads
        behind other loads that wait on it too."""
        layout = self._layout()
        sequential = self._advance(layout, offset, size)
        found = self._slabs_for(layout, offset, size)
        if found and layout is not None and not all(stream.done for stream, _, _ in found) \
                and self._data.cached(offset - layout.skip, size):
            found = []
        joined = _join(found) if found and all(stream.wait() for stream, _, _ in found) else None
        if joined is not None:
            return joined
        with self._lock:
            self._through.append(offset + size)
        try:
            data = self._view.read(offset, size)
        finally:
            with self._lock:
                self._through.remove(offset + size)
        if sequential:
            self._prefetch(offset + size)
        return data

    def continue_from(self, offset: int) -> None:
        """A reader in order reached this file at `offset` (from the file before it: a
        variable of data.nc after the one before); its first read there is in order."""
        with self._lock:
            if self._last_end is None:
                self._last_end = offset

    @property
    def reader_end(self) -> int:
        return self._furthest

    def take_ahead(self) -> list[Ahead]:
        with self._lock:
            taken, self._ahead = self._ahead, []
        return taken

    def slabs(self) -> dict[int, Slab]:
        """The slabs held now, by index (a copy: for looking at, as the tests do)."""
        with self._lock:
            return dict(self._slabs)

    def close(self) -> None:
        with self._lock:
            slabs, self._slabs, self._ahead = list(self._slabs.values()), {}, []
        for stream in slabs:
            stream.close()

    # -- slabs -----------------------------------------------------------------------------

    def _layout(self) -> SlabLayout | None:
        """Where the slabs lie in the view now (once per request: the shape may change)."""
        return slab_layout(self._data, self._skip)

    def _slabs_for(self, layout: SlabLayout | None, offset: int, size: int) -> list[tuple[Slab, int, int]]:
        """The slabs holding bytes [offset, offset + size) of the view (clipped to its end),
        with where the bytes lie in each; empty unless slabs hold all of them."""
        if layout is None:
            return []
        skip, slab_bytes = layout.skip, layout.nbytes
        end = min(offset + size, layout.data_size + skip)
        if offset < skip or end <= offset:
            return []
        found = []
        with self._lock:
            for index in range((offset - skip) // slab_bytes, (end - skip - 1) // slab_bytes + 1):
                stream = self._slabs.get(index)
                if stream is None:
                    return []
                base = skip + index * slab_bytes
                found.append((stream, max(offset, base) - base, min(end, base + slab_bytes) - base))
        return found

    def _advance(self, layout: SlabLayout | None, offset: int, size: int) -> bool:
        """Keep the slab behind the reader's, its own and the next SLABS_AHEAD the budget pays
        for (starting those not started), one more ahead if started, and no others; whether
        the reader is sequential."""
        index = None if layout is None or offset < layout.skip else (offset - layout.skip) // layout.nbytes
        with self._lock:
            # Inside the slabs held counts as in order: the kernel's readahead has several
            # requests in flight, and they may arrive further apart than the slack. A first
            # read is in order only at the file's start.
            last = self._last_end
            sequential = (offset == 0 if last is None else abs(offset - last) <= SEQUENTIAL_SLACK) \
                or index in self._slabs
            self._streak = (self._streak if sequential else 0) + size
            self._last_end = offset + size
            self._furthest = max(self._furthest, offset + size)
            streaked = sequential and (self._streak >= STREAK_BYTES or bool(self._slabs))
            earned = streaked or (sequential and self._opening(layout, last))
            self._earn(layout, offset, size, earned)
            if layout is None or index is None:
                return sequential
            beyond = SLABS_AHEAD if streaked else 0
            ahead, last = self._wanted(layout, index, offset + size, beyond) if earned else (range(0), index)
            # (and one more ahead: a request from behind must not drop the slab last started)
            kept = range(index - 1, last + SLABS_AHEAD + 2) if ahead else range(0)
            stale = [i for i, s in self._slabs.items() if i not in kept or _stale(s)]
            dropped = [self._slabs.pop(i) for i in stale]
            # (not taken, when nothing pushes: kept only while their slabs are held)
            self._ahead = [a for a in self._ahead if all(a.slab is not d for d in dropped)]
        for closed in dropped:  # first: their buffers go to the slabs started next
            closed.close()
        with self._lock:
            for wanted in ahead:
                if wanted not in self._slabs:
                    stream = self._data.stream_rows(wanted * layout.rows, (wanted + 1) * layout.rows)
                    if stream is None:
                        break  # readers' buffers are full: read through the cache
                    self._slabs[wanted] = stream
                    if wanted > index:
                        start = layout.skip + wanted * layout.nbytes
                        size = min(layout.nbytes, layout.skip + layout.data_size - start)
                        self._ahead.append(Ahead(start, size, stream))
        return sequential

    def _opening(self, layout: SlabLayout | None, last: int | None) -> bool:
        """Whether this, a first read at the file's start, reads its own slabs (not those ahead
        yet): every chunk of them is decoded to answer it anyway, into a slab by the decoding
        processes rather than into the cache by the daemon's threads. Not from a remote store
        (a reader first earns the requests reading ahead costs), and not of a file smaller than
        the streak (read through the cache, which keeps its chunks for the array's other
        files)."""
        return (last is None and not self._data.priced_in_requests and layout is not None
                and layout.data_size > STREAK_BYTES)

    def _wanted(self, layout: SlabLayout, index: int, end: int, beyond: int) -> tuple[range, int]:
        """The slabs to hold for a read in order of slab `index` up to `end` (with the lock
        held), and the last of the read's own: those of the read itself (a read that needs one
        not started reads through the cache, and would fetch its chunks twice), then up to
        `beyond` more the budget pays for; but not one that reads through the cache are
        loading into now (their chunks would be fetched twice): the first slabs begin after
        them."""
        slabs = -(-layout.data_size // layout.nbytes)
        last = max(index, (min(end, layout.skip + layout.data_size) - 1 - layout.skip) // layout.nbytes)
        through = max(self._through, default=0)
        first = index if self._slabs or through <= layout.skip + index * layout.nbytes else \
            max(index, (through - 1 - layout.skip) // layout.nbytes + 1)
        affordable = self._budget // layout.requests
        return range(first, min(last + 1 + min(beyond, affordable), slabs)), last

    def _earn(self, layout: SlabLayout | None, offset: int, size: int, earned: bool) -> None:
        """The budget after a read (with the lock held): twice what the read cost, or double
        what it was, once earned; nothing after a read out of order (or too few in order)."""
        if not earned:
            self._budget = self._window = 0
            return
        if not self._data.priced_in_requests:  # (bytes bound it: slabs, PREFETCH_BYTES)
            self._budget = UNBOUNDED
        else:
            cost = self._cost(layout, offset, size)
            self._budget = min(UNBOUNDED, max(2 * self._budget, FIRST_AHEAD_REQUESTS, 2 * cost))
        self._window = min(self._prefetch_bytes, max(2 * self._window, FIRST_WINDOW_REQUESTS * size))

    def _cost(self, layout: SlabLayout | None, offset: int, size: int) -> int:
        """The read chunks a read touches: in whole rows of them when the file has slabs (no
        more arithmetic on the event loop than that), else exactly."""
        if layout is None:
            skip = self._skip()
            return self._data.requests(max(0, offset - skip), size - max(0, skip - offset))
        row_bytes = layout.nbytes // layout.rows
        first = max(0, offset - layout.skip) // row_bytes // layout.chunk_rows
        last = max(0, offset + size - 1 - layout.skip) // row_bytes // layout.chunk_rows
        return (last - first + 1) * layout.row_requests

    # -- the cache-filling way -------------------------------------------------------------

    def _prefetch(self, end: int) -> None:
        """Load the chunks ahead of the reader into the cache, up to the window and what the
        budget pays for, when what is loaded ahead runs low (and no slabs are held: they read
        ahead instead)."""
        with self._lock:
            window, budget = self._window, self._budget
            if self._slabs or not window or self._prefetched_to - end >= window // 2:
                return
            start = max(self._prefetched_to, end)
        size = end + window - start
        skip = self._skip()
        while size > 0 and self._data.requests(max(0, start - skip), size) > budget:
            size //= 2  # (a request of a reader in order costs less than the budget: it ends)
        if size <= 0:
            return
        with self._lock:
            self._prefetched_to = start + size
        self._view.prefetch(start, size)


def _stale(stream: Slab) -> bool:
    """Finished but not current: a write came after it began."""
    return stream.done and not stream.current


def _join(found: list[tuple[Slab, int, int]]) -> bytes | memoryview | None:
    """The bytes of one slab as they are; of several (a request across a boundary) copied;
    None when a slab was closed meanwhile."""
    parts = [stream.piece(start, stop) for stream, start, stop in found]
    if any(part is None for part in parts):
        return None
    return parts[0] if len(parts) == 1 else b"".join(part for part in parts if part is not None)
