"""The tiles of `data.tif` that are chunks as stored (`tiff_view`): each in a slot of its own,
at an offset and with a byte count known without the store (the codec's bound), read from the
store whole when a reader reaches it and kept a while with its padding (a reader asks for the
whole byte count, in one request or a few: each is then a view of what is kept), so a
reader's requests for one tile cost one fetch and one copy.

Bytes a local store has in the page cache are read again at each request instead, into one
buffer of the fuse thread's: new memory costs more than the read (measured: a 512 KiB slot
0.2 ms to fault in, its tile 0.03 ms to read from the page cache)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Protocol

from ..array.cache import KeyedLocks
from ..codecs import BytesLike
from ..grid import Index
from .held_bytes import HeldBytes

# Encoded tiles kept, of all files (a tile is read in several requests).
HELD_TILES = HeldBytes(32 << 20)
SKIPPABLE_MAGIC, SKIPPABLE_HEADER = (0x184D2A50).to_bytes(4, "little"), 8  # (zstd's format, 3.1.2)


class StoredReads(Protocol):
    @property
    def fetches_remotely(self) -> bool: ...
    def read_chunk_now(self, unit: Index, into: memoryview) -> int | None: ...
    def read_stored_unit(self, unit: Index) -> BytesLike | None: ...


class StoredTiles:
    """Tile n is read chunk `chunk_of(n)`, in slot n: its stored bytes (less a `trailer`), or
    the `fill` tile where the chunk is not stored, then `padding` up to the tile's byte count
    (one for every tile: the file's layout asks nothing of the store), then zeros. Stored
    bytes that do not fit (a writer's compressor past the codec's bound) are the tile encoded
    again (`reencode`). A tile is fetched whole when a reader reaches it, and kept a while."""

    def __init__(self, array: StoredReads, chunk_of: Callable[[int], Index], fill: bytes, *,
                 padding: Padding, trailer: int, reencode: Callable[[int], bytes]) -> None:
        self._array = array
        self._chunk_of = chunk_of
        self._fill = fill
        self._padded_fill: BytesLike | None = None  # (made when first read: most arrays have no gaps)
        self._padding = padding
        self._trailer = trailer
        self._reencode = reencode
        self._loading = KeyedLocks()  # (one fetch of a tile at a time: its requests come together)
        self._tiles = object()  # (these tiles' key in HELD_TILES)
        self._local = not array.fetches_remotely

    def held(self, tile: int, at: int, count: int) -> bytes | memoryview | None:
        """Bytes [at, at + count) of tile `tile`'s slot when they need no wait: kept, or (a
        local store) all in the page cache: then a view of this thread's buffer, good until
        the thread's next call (the fuse thread replies first), which holds the whole tile for
        the reader's next request of it."""
        key = (self._tiles, tile)
        found: BytesLike | None = SCRATCH.holding(key) if self._local else None  # (its next request)
        if found is None:
            found = HELD_TILES.get(key)
            if found is None and self._local:
                found = self._read_now(tile)
        return None if found is None else self._padding.slot(found, at, count)

    def read(self, tile: int, at: int, count: int) -> bytes | memoryview:
        """Bytes [at, at + count) of tile `tile`'s slot (`held` has just tried the page cache)."""
        key = (self._tiles, tile)  # (a fetch begun before a `forget` is kept where it began)
        with self._loading((tile,)):
            found = HELD_TILES.get(key)
            if found is None:
                found = self._fetched(tile)
                HELD_TILES.put(key, found)
            return self._padding.slot(found, at, count)

    def forget(self) -> None:
        """Fetch each tile again when it is next read (the ones kept age out of HELD_TILES)."""
        self._tiles = object()

    def _fetched(self, tile: int) -> BytesLike:
        """The tile padded to its byte count (the fill tile where the chunk is not stored)."""
        stored = self._array.read_stored_unit(self._chunk_of(tile))
        if stored is None:
            return self._fill_tile()
        found = memoryview(stored)[: len(stored) - self._trailer]
        return self._padding.padded(found if self._padding.fits(len(found)) else self._reencode(tile))

    def _fill_tile(self) -> BytesLike:
        if self._padded_fill is None:
            self._padded_fill = self._padding.padded(self._fill)
        return self._padded_fill

    def _read_now(self, tile: int) -> BytesLike | None:
        """A local store's tile, if every byte of it is in the page cache: a chunk that is an
        object of its own read whole, an inner chunk where its shard's index says (read as its
        shard is first reached, then cached)."""
        # (padded in the buffer: a reader's request of the whole count is a view of it, not
        # a new join of the tile and zeros, 0.2 ms a 512 KiB tile in fresh memory here)
        into = SCRATCH.lend((self._tiles, tile), self._padding.length)
        size = self._array.read_chunk_now(self._chunk_of(tile), into)
        SCRATCH.wrote(len(into) if size is None else max(size, 0))
        if size is None or (size >= 0 and not self._padding.fits(size - self._trailer)):
            SCRATCH.forget()
            return None
        if size < 0:
            SCRATCH.forget()
            return self._fill_tile()
        length, end = size - self._trailer, self._padding.length
        SCRATCH.fill(length, self._padding.after(length, min(SKIPPABLE_HEADER, end - length)), end)
        return into


@dataclass(frozen=True)
class Padding:
    """What follows a tile in its slot, up to its byte count `length`: a zstd skippable frame
    (its readers read on past a frame's end: the frame says where the next one starts), else
    zeros (a zlib stream ends itself; uncompressed tiles fill their count)."""

    length: int
    skippable: bool

    def fits(self, size: int) -> bool:
        return size + (SKIPPABLE_HEADER if self.skippable else 0) <= self.length

    def padded(self, tile: BytesLike) -> BytesLike:
        """`tile` and its padding: `length` bytes (a tile longer is as it is)."""
        size = len(tile)
        return tile if size >= self.length else b"".join((tile, self.after(size, self.length - size)))

    def after(self, size: int, count: int) -> bytearray:
        """The first `count` bytes after a tile of `size` bytes: the padding, then zeros."""
        after = bytearray(count)
        if self.skippable and size < self.length:
            header = SKIPPABLE_MAGIC + (self.length - size - SKIPPABLE_HEADER).to_bytes(4, "little")
            after[: min(len(header), count)] = header[:count]
        return after

    def slot(self, tile: BytesLike, at: int, count: int) -> bytes | memoryview:
        """Bytes [at, at + count) of the slot of `tile` (a view when all are the tile's)."""
        size = len(tile)
        if at + count <= size:
            return memoryview(tile)[at : at + count]
        after = self.after(size, at + count - size)  # (the slot's bytes from the tile's end)
        head = memoryview(tile)[at:] if at < size else b""
        return b"".join((head, after[max(0, at - size) :]))


class Scratch(threading.local):
    """One buffer per thread, lent again at each call, and what it holds. It knows from where
    on its bytes are all zeros, so that padding a tile writes only the bytes the tile before
    left (a tile's slot is mostly zeros: writing them all cost as much as reading the tile)."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._holds: tuple[Hashable, int] | None = None  # (what, and how many bytes)
        self._zeros_from = 0  # (every byte from here on is zero)

    def reserve(self, length: int) -> None:
        """Make the buffer `length` bytes long ahead of its first use (its pages cost a first
        tile read 0.25 ms: at the file's open instead)."""
        if len(self._buffer) < length:
            self._buffer, self._holds, self._zeros_from = bytearray(length), None, 0

    def lend(self, key: Hashable, length: int) -> memoryview:
        """`length` bytes for `key` (the caller fills them, and says how many it `wrote`)."""
        self.reserve(length)
        self._holds = (key, length)
        return memoryview(self._buffer)[:length]

    def wrote(self, count: int) -> None:
        """The first `count` bytes lent were written (they may not be zeros)."""
        self._zeros_from = max(self._zeros_from, count)

    def fill(self, at: int, head: bytes | bytearray, end: int) -> None:
        """Make bytes [at, end) of the buffer `head`, then zeros."""
        stop = at + len(head)
        self._buffer[at:stop] = head
        if stop < self._zeros_from:
            dirty = min(end, self._zeros_from)
            self._buffer[stop:dirty] = bytes(dirty - stop)
        if end >= self._zeros_from:
            self._zeros_from = stop

    def holding(self, key: Hashable) -> memoryview | None:
        """What was lent last for `key`, if that was the last lent."""
        if self._holds is None or self._holds[0] != key:
            return None
        return memoryview(self._buffer)[: self._holds[1]]

    def forget(self) -> None:
        self._holds = None


SCRATCH = Scratch()
