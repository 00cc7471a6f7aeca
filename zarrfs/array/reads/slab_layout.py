"""Where the slabs of a flat file of the whole array lie (zarrfs.array.reads.readahead): runs of
whole rows of read chunks, several rows to a slab where rows are small; where a row of chunks
is larger than a slab may be (a volume of deep chunks, read plane after plane), bands of its
rows, every band decoding every chunk of its row (from a local store: a remote one's reading
ahead is priced in requests, and such a row is read through the cache within that price)."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, Protocol

SLAB_BYTES = 8 << 20  # slabs hold whole rows of chunks, about this much when rows are small
MAX_SLAB_BYTES = 64 << 20  # rows of chunks larger than this are read in bands of their rows
# ... and at most this many read chunks (requests: a missing chunk costs a lookup), at least a
# row of them: 8 MiB of 16 x 16 uint8 chunks would be 32,768 requests, seconds on S3.
SLAB_REQUESTS = 1024
# Bands as large as this share of what the readers' slabs may hold: one is read while the next
# is filled. A (128, 2048, 2048) uint16 volume in 64^3 zstd chunks (rows of chunks of 512 MiB)
# read by `dd` at cache=256M: through the cache 70 s, each chunk decoded 64 times; in bands
# of 4 planes (this share) 10.7 s, 16 times; of 8, one at a time (the band behind the reader
# kept the next from being lent), 37 s.
BAND_SLABS = 2


class SlabLayout(NamedTuple):
    rows: int  # of the array per slab
    nbytes: int  # per slab
    chunk_rows: int  # rows of the array per row of read chunks
    row_requests: int  # read chunks per row of them
    requests: int  # read chunks per slab
    skip: int  # bytes of the view before the array's (a header)
    data_size: int  # bytes of the array's


class Rows(Protocol):
    """The flat file of an array, as rows: what its slabs' layout depends on."""

    @property
    def size(self) -> int: ...

    @property
    def row_bytes(self) -> int: ...

    @property
    def slab_bytes(self) -> int:
        """What the slabs of every reader may hold at once."""

    @property
    def priced_in_requests(self) -> bool:
        """Whether reading ahead is bounded by the requests it costs (a remote store), or
        only by the bytes (a local one)."""

    def slab_rows(self) -> int | None: ...
    def row_requests(self) -> int: ...


def slab_layout(data: Rows, skip: Callable[[], int]) -> SlabLayout | None:
    """Where the slabs of `data` lie (after `skip()` bytes of a header), or None when it has
    none (not the whole array, or a single row too large for a slab)."""
    rows = data.slab_rows()
    if rows is None:
        return None
    row_bytes = data.row_bytes
    row_requests = max(1, data.row_requests())
    if rows * row_bytes > MAX_SLAB_BYTES:
        if data.priced_in_requests:  # (a band costs every chunk of its row: read through the cache)
            return None
        band = _band_rows(rows, row_bytes, min(MAX_SLAB_BYTES, data.slab_bytes // BAND_SLABS))
        return None if band is None else SlabLayout(band, band * row_bytes, rows, row_requests, row_requests,
                                                    skip(), data.size)
    per_slab = max(1, min(SLAB_BYTES // (rows * row_bytes), SLAB_REQUESTS // row_requests))
    return SlabLayout(rows * per_slab, rows * per_slab * row_bytes, rows, row_requests,
                      per_slab * row_requests, skip(), data.size)


def _band_rows(chunk_rows: int, row_bytes: int, most_bytes: int) -> int | None:
    """The rows of a band: the most that fit in `most_bytes` and divide the row of chunks
    evenly (the fewer bands to a row, the fewer times each chunk is decoded); None: not one."""
    fitting = min(chunk_rows, most_bytes // row_bytes)
    return max((rows for rows in range(1, fitting + 1) if chunk_rows % rows == 0), default=None)
