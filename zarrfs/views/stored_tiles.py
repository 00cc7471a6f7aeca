"""The tiles of `data.tif` that are chunks as stored (`tiff_view`): read from the store whole
(or, unaligned, just the bytes asked for) and kept a while as fetched, so a reader's requests
for one tile cost one fetch; the zeros after a tile in its slot are joined only to the
request that reaches them (a reader's last block of the tile).

Bytes a local store has in the page cache are read again at each request instead, into one
buffer of the fuse thread's: new memory costs more than the read (measured: a 512 KiB slot
0.2 ms to fault in, its tile 0.03 ms to read from the page cache)."""

from __future__ import annotations

import threading
from collections.abc import Hashable, Sequence
from dataclasses import replace
from typing import Protocol

from ..array.cache import KeyedLocks
from ..array.chunk_io import StoredChunk
from ..codecs import BytesLike
from .held_bytes import HeldBytes

# Encoded tiles kept, of all files (a tile is read in several requests).
HELD_TILES = HeldBytes(32 << 20)


class StoredReads(Protocol):
    def read_stored(self, where: StoredChunk) -> BytesLike: ...
    def read_stored_now(self, where: StoredChunk, into: memoryview) -> bool: ...


class StoredTiles:
    """Piece 0 is the fill tile, then the tiles stored at `sources`, each in a slot of `slot`
    bytes or a multiple (1: packed). Aligned tiles are fetched whole, as no read reaches into
    a tile it does not want; packed ones whole when a read wants most of one, else just the
    bytes asked for (a reader reading in blocks reaches a little into the tiles beside it)."""

    def __init__(self, array: StoredReads, fill: bytes, sources: Sequence[StoredChunk], *, slot: int,
                 trailer: int) -> None:
        self._array = array
        self._sources = sources
        self._slot = slot
        self._trailer = trailer  # (stored bytes after the tile: a checksum)
        self._fill = fill
        self._loading = KeyedLocks()  # (one fetch of a tile at a time: its requests come together)
        self._tiles = object()  # (these tiles' key in HELD_TILES)

    def held(self, piece: int, at: int, count: int) -> bytes | memoryview | None:
        """Bytes [at, at + count) of tile `piece`'s slot when they need no wait: kept, or (a
        local store, aligned tiles) all in the page cache: then a view of this thread's
        buffer, good until the thread's next call (the fuse thread replies first), which
        holds the whole tile for the reader's next request of it."""
        found = self._kept(piece)
        if found is None and self._slot > 1:
            found = SCRATCH.holding((self._tiles, piece)) or self._read_now(piece)
        return None if found is None else _in_slot(found, at, count)

    def read(self, piece: int, at: int, count: int) -> bytes | memoryview:
        """Bytes [at, at + count) of tile `piece`'s slot (`held` has just tried the page cache)."""
        with self._loading((piece,)):
            found = self._kept(piece)
            if found is None:
                where = self._sources[piece - 1]
                if self._slot == 1 and 2 * count < where.nbytes:
                    return memoryview(self._array.read_stored(replace(where, offset=where.offset + at,
                                                                       nbytes=count)))
                found = memoryview(self._array.read_stored(where))[: where.nbytes - self._trailer]
                HELD_TILES.put((self._tiles, piece), found)  # (as fetched: no slot made, nor copy)
            return _in_slot(found, at, count)

    def _kept(self, piece: int) -> BytesLike | None:
        return self._fill if piece == 0 else HELD_TILES.get((self._tiles, piece))

    def _read_now(self, piece: int) -> memoryview | None:
        where = self._sources[piece - 1]
        length = where.nbytes - self._trailer
        tile = SCRATCH.lend((self._tiles, piece), length)
        if self._array.read_stored_now(replace(where, nbytes=length), tile):
            return tile
        SCRATCH.forget()
        return None


def _in_slot(tile: BytesLike, at: int, count: int) -> bytes | memoryview:
    """Bytes [at, at + count) of a tile's slot: the tile's, then zeros (copied only then: the
    last block of a tile, a few KiB)."""
    found = memoryview(tile)[at : at + count]
    return found if len(found) == count else b"".join((found, bytes(count - len(found))))


class Scratch(threading.local):
    """One buffer per thread, lent again at each call, and what it holds."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._holds: tuple[Hashable, int] | None = None  # (what, and how many bytes)

    def reserve(self, length: int) -> None:
        """Make the buffer `length` bytes long ahead of its first use (its pages cost a first
        tile read 0.25 ms: at the file's open instead)."""
        if len(self._buffer) < length:
            self._buffer, self._holds = bytearray(length), None

    def lend(self, key: Hashable, length: int) -> memoryview:
        """`length` bytes for `key` (the caller fills them)."""
        self.reserve(length)
        self._holds = (key, length)
        return memoryview(self._buffer)[:length]

    def holding(self, key: Hashable) -> memoryview | None:
        """What was lent last for `key`, if that was the last lent."""
        if self._holds is None or self._holds[0] != key:
            return None
        return memoryview(self._buffer)[: self._holds[1]]

    def forget(self) -> None:
        self._holds = None


SCRATCH = Scratch()
