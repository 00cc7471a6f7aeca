"""Entries of a remote zip read with their neighbours: one ranged read for a run of entries
lying one after another in the archive (see `zip_index`).

A read of `data` that crosses a row of small chunks asks for every chunk of the row at once,
from many loader threads; zarr-python's ZipStore (and `zip -r`) write those chunks next to
each other. So the first thread to ask for an entry reads it and the entries that follow it
(while they lie within `GAP` bytes of each other and the read stays within `SPAN_BYTES`,
and no other read has them coming already), and the threads asking for those wait for that
read instead of making their own: on S3 at 20 ms, a read across 128 chunks of 2 KiB is a
handful of requests, not 128. A thread's own entry always comes first in its span, so an
isolated read costs one request, as before, of at most `SPAN_BYTES`.

What was read for an entry and not yet asked for waits for at most `MAX_SPANS` spans
(16 MiB), oldest dropped first; a dropped entry is read again if it is asked for. A failed
read fails the entries waiting for it (each reader then reports it, as it would its own);
those asked for after it are read again.
"""

from __future__ import annotations

import bisect
import itertools
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from concurrent.futures import Future

# Bytes [start, start + length) of the archive (fewer past its end).
RangeReader = Callable[[int, int], bytes]
SPAN_BYTES = 256 << 10  # (20 ms of a round trip buys ~2 MB at 100 MB/s: this wastes little)
GAP = 4 << 10  # entries this far apart still join one read
MAX_SPANS = 64
# A span of the archive, read once for the entries it holds: (where its bytes start, the bytes).
ArchiveSpan = Future[tuple[int, bytes]]


class Spans:
    """Reads entries (by their extents: the bytes from the local header to the end of the
    data, with a margin) joined with the entries that follow them."""

    def __init__(self, keys: Iterable[str], extent: Callable[[str], tuple[int, int]],
                 read_range: RangeReader) -> None:
        self._extent = extent  # key -> (start, length) in the archive
        # (two flat lists: a zip of 10^6 entries keeps no second dictionary of them)
        self._order = sorted(keys, key=lambda key: extent(key)[0])
        self._starts = [extent(key)[0] for key in self._order]
        self._read_range = read_range
        self._lock = threading.Lock()
        self._coming: dict[str, ArchiveSpan] = {}  # entries a span holds or will hold, not yet taken
        self._spans: OrderedDict[ArchiveSpan, list[str]] = OrderedDict()

    def read(self, key: str) -> bytes:
        """The bytes of `key`'s extent (fewer at the end of the archive)."""
        start, length = self._extent(key)
        with self._lock:
            span = self._coming.pop(key, None)
            members = [] if span is not None else self._following(key)
            if span is None:
                span = ArchiveSpan()
                self._remember(span, members)
        if members:  # (this thread reads the span; the others wait for it)
            end = max(sum(self._extent(member)) for member in members)
            try:
                span.set_result((start, self._read_range(start, end - start)))
            except BaseException as e:
                self._forget(span)  # (entries asked for later are read again)
                span.set_exception(e)
        first, data = span.result()
        return data[start - first : start - first + length]

    def _following(self, key: str) -> list[str]:
        """`key` and the entries after it that join its read (with the lock held)."""
        start, length = self._extent(key)
        members, end = [key], start + length
        for later in itertools.islice(self._order, bisect.bisect_left(self._starts, start) + 1, None):
            later_start, later_length = self._extent(later)
            later_end = later_start + later_length
            if later in self._coming or later_start > end + GAP or later_end - start > SPAN_BYTES:
                break
            members.append(later)
            end = max(end, later_end)
        return members

    def _remember(self, span: ArchiveSpan, members: list[str]) -> None:
        """Note that `span` brings `members` (but the first, its reader's own). A span that
        brings no other entry is not kept: it is its reader's alone."""
        if len(members) <= 1:
            return
        for later in members[1:]:
            self._coming[later] = span
        self._spans[span] = members[1:]
        while len(self._spans) > MAX_SPANS:
            self._drop(next(iter(self._spans)))

    def _forget(self, span: ArchiveSpan) -> None:
        with self._lock:
            if span in self._spans:
                self._drop(span)

    def _drop(self, span: ArchiveSpan) -> None:
        """(with the lock held)"""
        for later in self._spans.pop(span):
            if self._coming.get(later) is span:
                del self._coming[later]
