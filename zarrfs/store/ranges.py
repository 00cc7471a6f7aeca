"""Byte ranges of one stored object: the ranges a read may ask for (`ByteRange`,
`SuffixRange`: `core.Store.get` takes them, and the stores built over another store's
objects, `zipped`, make them), which requests to send for many ranges at once (`merge`), and
the object stores' answer to a range past the end (`RangePastEnd`). A leaf module, pure
functions, no I/O.

On a remote store a request costs a round trip (10-50 ms on a real network, ~4 ms of a local
test server) whatever its size, and the bytes between two wanted ranges cost only their
transfer: ranges whose gap is small are read with one request, and the skipped bytes are
thrown away.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field


class RangePastEnd(OSError):
    """HTTP 416 (Range Not Satisfiable): the range starts past the end of the object; the
    object stores' drivers read it as nothing there."""


@dataclass(frozen=True)
class ByteRange:
    """Bytes [start, start + length) of an object; fewer come back past its end."""

    start: int
    length: int


@dataclass(frozen=True)
class SuffixRange:
    """The last `length` bytes of an object."""

    length: int


# A gap this small costs less to read than another request (~1 MiB at 100-400 MB/s is
# 3-10 ms, a round trip 10-50 ms).
REMOTE_GAP = 1 << 20


@dataclass
class RangeRequest:
    """Bytes [start, stop) of the object, holding the wanted ranges `members` (their
    positions in the list given to `merge`)."""

    start: int
    stop: int
    members: list[int] = field(default_factory=list)

    @property
    def nbytes(self) -> int:
        return self.stop - self.start


def merge(ranges: Sequence[tuple[int, int]], *, max_gap: int = 0, gap_fraction: float = 0.0,
          max_bytes: int | None = None) -> list[RangeRequest]:
    """The requests covering `ranges` ((start, stop) pairs, any order, not overlapping), in
    the object's order: a range joins the request before it when the gap between them is at
    most `max_gap`, or at most `gap_fraction` of the bytes that request wants so far, and the
    request then spans at most `max_bytes` (a single range longer than that is its own
    request). `max_gap=0`: only ranges lying right after each other are joined."""
    requests: list[RangeRequest] = []
    wanted = 0  # bytes the last request wants (not counting gaps)
    for position in sorted(range(len(ranges)), key=lambda i: ranges[i][0]):
        start, stop = ranges[position]
        last = requests[-1] if requests else None
        if last is not None:
            gap = start - last.stop
            small = gap <= max(max_gap, int(gap_fraction * wanted))
            fits = max_bytes is None or stop - last.start <= max_bytes
            if gap >= 0 and small and fits:
                last.stop = max(last.stop, stop)
                last.members.append(position)
                wanted += stop - start
                continue
        requests.append(RangeRequest(start, stop, [position]))
        wanted = stop - start
    return requests


def worth_whole(requests: Sequence[RangeRequest], object_nbytes: int, fraction: float = 0.5) -> bool:
    """Whether reading the whole object costs less than `requests`: they would read at least
    `fraction` of it anyway, or there are several and the object is small."""
    if not requests:
        return False
    read = sum(request.nbytes for request in requests)
    return read >= fraction * object_nbytes or (len(requests) > 1 and object_nbytes <= REMOTE_GAP)
