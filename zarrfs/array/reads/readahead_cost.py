"""What reading ahead costs, in store requests: the read chunks a run of bytes of a flat C-order
file touches, and the kernel's readahead window a mount's arrays can afford, by what a request
costs on their store (a round trip, or a local file's read).

A request is one read chunk (an inner chunk of a shard), stored or not: a missing chunk costs a
lookup. On an array of small chunks, bytes are a poor price: 1 MiB of a 2048 x 2048 uint8
array in 16 x 16 chunks is 4,096 requests (minutes of S3 round trips a second), of an array in
512 x 512 chunks a few dozen. So what is read ahead, here and by the kernel, is bounded by the
requests it costs.

The kernel's window matters most for `mmap` readers: a page fault reads the window around the
page, whatever the reader touches, and a file opened on a mount keeps the window the mount had
then (the kernel copies it at open). So the mount's window is chosen once, from the arrays'
chunks (`kernel_window_kb`): the largest whose reads cost a page's own requests at most twice
over, or that costs a few dozen requests at most, between KERNEL_MIN_KB and KERNEL_MAX_KB.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

from ...grid import Box, flat_boxes

PAGE = 4096
KERNEL_MIN_KB = 8  # (an mmap reader in order is served a window at a time: not one page)
KERNEL_MAX_KB = 1024  # (the kernel's requests are at most 1 MiB anyway)
# A window that costs at most this is never shrunk: 1 MiB of 512 x 512 chunks of uint16 is 32
# to 64 of them, and each request brings half a megabyte. On a local store a request is a read
# of a file the page cache most likely holds and a decode (tens of microseconds, not a round
# trip of milliseconds): 1,024 of them cost a reader tens of milliseconds, and a window that
# wide serves an `mmap` reader of 32 x 32 float32 chunks 1 MiB at a time (8 KiB at 64).
FREE_REQUESTS = 64
LOCAL_FREE_REQUESTS = 1024

ChunkSpan = tuple[tuple[int, int], ...]  # chunk index ranges [lo, hi) per axis


def chunks_touched(shape: Sequence[int], chunk: Sequence[int], first: int, last: int) -> int:
    """How many chunks of a regular grid the C-order elements [first, last) touch (exactly:
    the boxes of the run share chunks where they meet)."""
    if last <= first or not shape:
        return 0 if last <= first else 1
    return chunks_in(flat_boxes(shape, first, last), chunk)


def chunks_in(boxes: Sequence[Box], chunk: Sequence[int]) -> int:
    """How many chunks of a regular grid the boxes touch, each counted once."""
    return _union([_chunk_span(box, chunk) for box in boxes if box.size])


@functools.lru_cache(maxsize=256)  # (asked at every stat of `data`: st_blksize)
def kernel_window_kb(shape: tuple[int, ...], chunk: tuple[int, ...], itemsize: int,
                     free_requests: int = FREE_REQUESTS) -> int:
    """The kernel's readahead (KiB) for `data` of an array: the largest power of two whose
    reads around a page fault cost at most twice what the page costs alone, or
    `free_requests` (FREE_REQUESTS on a remote store, LOCAL_FREE_REQUESTS on a local one).
    A reader of a few pages by `mmap` has the kernel read three windows: half of one before
    the page, the rest of it, and one more ahead (its readahead of what the reader is about
    to touch); measured, 16 KiB at the middle of a 2048 x 2048 uint8 array in 16 x 16
    chunks: 8 KiB windows read 2 rows of chunks, 16 KiB windows 3, 32 KiB 4, 1 MiB 32."""
    size = math.prod(shape) * itemsize
    if not shape or not size or not itemsize:
        return KERNEL_MAX_KB
    budget = max(free_requests, 2 * _worst(shape, chunk, itemsize, PAGE, best=True))
    kb = KERNEL_MAX_KB
    while kb > KERNEL_MIN_KB and _worst(shape, chunk, itemsize, 3 * kb << 10) > budget:
        kb //= 2
    return kb


def _worst(shape: Sequence[int], chunk: Sequence[int], itemsize: int, nbytes: int,
           best: bool = False) -> int:
    """The chunks a run of `nbytes` costs in the middle of the array: across the boundary of
    two rows of chunks where it costs most (or, `best`, starting at one)."""
    size = math.prod(shape) * itemsize
    nbytes = min(nbytes, size)
    boundary = (shape[0] // chunk[0] // 2) * chunk[0] * (size // shape[0])  # (a row of chunks begins)
    starts = [boundary] if best else [boundary - nbytes // 2, boundary - nbytes + itemsize,
                                      boundary - itemsize]
    found = 0
    for start in starts:
        start = min(max(0, start), size - nbytes) // itemsize
        found = max(found, chunks_touched(shape, chunk, start, start + -(-nbytes // itemsize)))
    return found


def _chunk_span(box: Box, chunk: Sequence[int]) -> ChunkSpan:
    return tuple((a // c, -(-b // c)) for a, b, c in zip(box.start, box.stop, chunk, strict=True))


def _union(spans: list[ChunkSpan]) -> int:
    """The chunks in any of the spans: each span less what it shares with those after it."""
    total = 0
    for i, span in enumerate(spans):
        shared = [both for other in spans[i + 1 :] if (both := _intersect(span, other)) is not None]
        total += math.prod(hi - lo for lo, hi in span) - _union(shared)
    return total


def _intersect(a: ChunkSpan, b: ChunkSpan) -> ChunkSpan | None:
    both = tuple((max(x[0], y[0]), min(x[1], y[1])) for x, y in zip(a, b, strict=True))
    return None if any(lo >= hi for lo, hi in both) else both
