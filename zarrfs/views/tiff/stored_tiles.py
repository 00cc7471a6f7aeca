"""The tiles of `data.tif` that are chunks as stored (`array_file`): tile n in slot n, at an
offset known without the store; its bytes are exactly the chunk's stored bytes (less a
checksum after them), then zeros up to the next slot, and its byte count is their length
(`tile_sizes`, learned as a reader reads the tables). A compressed tile that would end on a
block (`layout.READER_BLOCK`) has `layout.LEAD` zeros before it in its slot, which has room
for them: its offset says so, made of the same length. A tile is read from the store whole when
a reader reaches it and kept a while (a reader asks for it in one request or a few: each is
then a view of what is kept), so a reader's requests for one tile cost one fetch.

Bytes a local store has in the page cache are read again at each request instead, into one
buffer of the fuse thread's: new memory costs more than the read (measured: a 512 KiB slot
0.2 ms to fault in, its tile 0.03 ms to read from the page cache)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Protocol

from ...array import HeldBytes, KeyedLocks
from ...codecs import BytesLike
from ...errors import ChunkError
from ...grid import Index
from .layout import LEAD, leads
from .tile_sizes import MISSING, UNKNOWN, TileSizes

# Tiles kept, of all files (a tile is read in several requests): these, and decoded tiles read
# in parts (`decoded_tiles`), in one budget.
HELD_TILES = HeldBytes(32 << 20)
SKIPPABLE_MAGIC, SKIPPABLE_HEADER = (0x184D2A50).to_bytes(4, "little"), 8  # (zstd's format, 3.1.2)


class StoredReads(Protocol):
    @property
    def fetches_remotely(self) -> bool: ...
    def read_chunk_now(self, unit: Index, into: memoryview) -> int | None: ...
    def read_stored_unit(self, unit: Index) -> BytesLike | None: ...
    def stored_sizes(self, units: Sequence[Index]) -> Mapping[Index, int]: ...


class StoredTiles:
    """Tile n is read chunk `chunk_of(n)`, in a slot of `slot` bytes: its stored bytes (less
    a `trailer`), or the `fill` tile where the chunk is not stored, then zeros. Stored bytes
    too long for the slot (a writer's compressor past the codec's bound) are the tile encoded
    again (`reencode`). With `learned` tiles, their byte counts are learned as the tables are
    read (`sizes`), slot `tiles` holds the fill tile the chunks not stored point at, and a
    tile is at most `slot - LEAD` long (a lead's room); else every tile's byte count is the
    slot's (uncompressed tiles). A tile is fetched whole when a reader reaches it, and kept a
    while."""

    def __init__(self, array: StoredReads, chunk_of: Callable[[int], Index], fill: bytes, *, tiles: int,
                 slot: int, trailer: int, reencode: Callable[[int], bytes], skippable: bool,
                 learned: bool) -> None:
        self._array = array
        self._chunk_of = chunk_of
        self._fill = fill
        self._slot = slot
        self._room = slot - LEAD if learned else slot  # (the longest a tile is)
        self._trailer = trailer
        self._reencode = reencode
        self._skippable = skippable  # (zstd: a tile found shorter than its count is padded with a frame)
        self.sizes = TileSizes(tiles, slot, len(fill), self._learn) if learned else None
        self._loading = KeyedLocks()  # (one fetch of a tile at a time: its requests come together)
        self._tiles = object()  # (these tiles' key in HELD_TILES)
        self._local = not array.fetches_remotely

    def held(self, tile: int, at: int, count: int) -> bytes | memoryview | None:
        """Bytes [at, at + count) of tile `tile`'s slot when they need no wait: kept, or (a
        local store) all in the page cache: then a view of this thread's buffer, good until
        the thread's next call (the fuse thread replies first), which holds the whole slot for
        the reader's next request of it."""
        if self._is_fill(tile):
            return self._laid(tile, self._fill, at, count)
        key = (self._tiles, tile)
        slot = SCRATCH.holding(key) if self._local else None  # (its next request)
        if slot is not None:
            return _in_slot(slot, at, count)
        found = HELD_TILES.get(key)
        if found is not None:
            return self._laid(tile, found, at, count)
        return self._read_now(tile, at, count) if self._local else None

    def read(self, tile: int, at: int, count: int) -> bytes | memoryview:
        """Bytes [at, at + count) of tile `tile`'s slot (`held` has just tried the page cache)."""
        if self._is_fill(tile):
            return self._laid(tile, self._fill, at, count)
        key = (self._tiles, tile)  # (a fetch begun before a `forget` is kept where it began)
        with self._loading((tile,)):
            found = HELD_TILES.get(key)
            if found is None:
                found = self._fetched(tile)
                HELD_TILES.put(key, found)
            return self._laid(tile, found, at, count)

    def forget(self) -> None:
        """Fetch each tile, and learn its size, again when it is next read (the ones kept age
        out of HELD_TILES)."""
        self._tiles = object()
        if self.sizes is not None:
            self.sizes.forget()

    def _laid(self, tile: int, found: BytesLike, at: int, count: int) -> bytes | memoryview:
        """Bytes [at, at + count) of the slot of tile `tile`, whose bytes are `found`: its
        lead (zeros, where it would end on a block), the tile, then zeros."""
        return _in_slot(found, at - self._lead(tile, len(found)), count)

    def _lead(self, tile: int, length: int) -> int:
        """The zeros before tile `tile` in its slot, `length` bytes long (as `sizes.offsets` has
        it: only compressed tiles have leads; uncompressed ones are laid out by `Slots.laid`)."""
        return int(leads(tile * self._slot, length)) if self.sizes is not None else 0

    def _is_fill(self, tile: int) -> bool:
        return self.sizes is not None and tile == self.sizes.tiles

    def _learn(self, tiles: Sequence[int]) -> dict[int, int]:
        """The size each of `tiles` has as a tile, for those stored: its chunk's stored size
        less the trailer, or (too long for its slot) its length encoded again."""
        units = {self._chunk_of(tile): tile for tile in tiles}
        found = {}
        for unit, size in self._array.stored_sizes(list(units)).items():
            tile = units[unit]
            size -= self._trailer
            found[tile] = size if size <= self._room else len(self._reencode(tile))
        return found

    def _fetched(self, tile: int) -> BytesLike:
        """The tile's bytes (the fill tile where the chunk is not stored)."""
        stored = self._array.read_stored_unit(self._chunk_of(tile))
        if stored is None:
            return self._as_learned(tile, self._fill)
        found = memoryview(stored)[: len(stored) - self._trailer]
        return self._as_learned(tile, found if len(found) <= self._room else self._reencode(tile))

    def _as_learned(self, tile: int, found: BytesLike) -> BytesLike:
        """`found` as long as the byte count readers were given for the tile. It differs only
        when the chunk changed in the store since (another writer): a shorter tile is padded
        as its decoders allow (zeros after a zlib stream, a skippable frame after zstd's)."""
        expected = UNKNOWN if self.sizes is None else self.sizes.size(tile)
        if expected in (UNKNOWN, MISSING, len(found)):
            return found
        room = expected - len(found)
        if room < 0 or (self._skippable and 0 < room < SKIPPABLE_HEADER):
            raise ChunkError(str(self._chunk_of(tile)),
                             "changed in the store since data.tif gave its size (open the file again)")
        after = bytearray(room)
        if self._skippable:
            after[:SKIPPABLE_HEADER] = SKIPPABLE_MAGIC + (room - SKIPPABLE_HEADER).to_bytes(4, "little")
        return b"".join((found, after))

    def _read_now(self, tile: int, at: int, count: int) -> bytes | memoryview | None:
        """Bytes [at, at + count) of a local store's tile's slot, if every byte of the tile is
        in the page cache and it is as long as the readers were told and has no lead (else a
        worker reads it): a chunk that is an object of its own read whole, an inner chunk
        where its shard's index says (read as its shard is first reached, then cached)."""
        # (zeros after it in the buffer: a reader's last request of it, reaching past its
        # byte count, is a view of the buffer, not a new join of the tile and zeros)
        into = SCRATCH.lend((self._tiles, tile), self._slot)
        size = self._array.read_chunk_now(self._chunk_of(tile), into)
        SCRATCH.wrote(len(into) if size is None else max(size, 0))
        expected = UNKNOWN if self.sizes is None else self.sizes.size(tile)
        if size is not None and size < 0 and expected == UNKNOWN:
            SCRATCH.forget()
            return self._laid(tile, self._fill, at, count)
        length = None if size is None or size < 0 else size - self._trailer
        if (length is None or length > self._room or expected not in (UNKNOWN, length)
                or self._lead(tile, length)):
            SCRATCH.forget()  # (a worker reads it, as long as the readers were told)
            return None
        SCRATCH.fill(length, b"", self._slot)
        return _in_slot(into, at, count)


def _in_slot(tile: BytesLike, at: int, count: int) -> bytes | memoryview:
    """Bytes [at, at + count) of the slot of `tile`: the tile, then zeros (a view when all
    are the tile's); from a negative `at`, zeros before it too."""
    if at < 0:
        before = bytes(min(-at, count))
        return before + _in_slot(tile, 0, count - len(before)) if count > len(before) else before
    size = len(tile)
    if at + count <= size:
        return memoryview(tile)[at : at + count]
    zeros = bytes(at + count - max(at, size))
    return b"".join((memoryview(tile)[at:], zeros)) if at < size else zeros


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
