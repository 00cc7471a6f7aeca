"""data.tif's tiles as stored, without FUSE or a store: an array of a few stored chunks (in
memory, counting what is asked of it) behind `StoredTiles`, and the tables made of what they
learn (`tile_sizes`): exact byte counts, learned a block at a time as the tables are read,
and the tiles' bytes exactly the stored ones, then zeros."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from zarrfs.errors import ChunkError
from zarrfs.grid import Index
from zarrfs.views.tiff.directories import IMAGE_WIDTH, Tag, TiffImage, tiff_header
from zarrfs.views.tiff.stored_tiles import StoredTiles
from zarrfs.views.tiff.tile_sizes import BLOCK, Learned

pytestmark = pytest.mark.fast

SLOT = 128


class Array:
    """Chunks (0, n) stored as `stored` says, each with a 4-byte checksum after it."""

    fetches_remotely = False

    def __init__(self, stored: dict[Index, bytes]) -> None:
        self.stored = {unit: data + b"crc!" for unit, data in stored.items()}
        self.cached = False  # (whether a read now finds its bytes in the page cache)
        self.fetched: list[Index] = []
        self.looked: list[Index] = []
        self.sized: list[list[Index]] = []

    def stored_sizes(self, units: Sequence[Index]) -> dict[Index, int]:
        self.sized.append(list(units))
        return {unit: len(self.stored[unit]) for unit in units if unit in self.stored}

    def read_stored_unit(self, unit: Index) -> bytes | None:
        self.fetched.append(unit)
        return self.stored.get(unit)

    def read_chunk_now(self, unit: Index, into: memoryview) -> int | None:
        self.looked.append(unit)
        if not self.cached:
            into[:10] = b"\xee" * 10  # (a read that stopped part way)
            return None
        if unit not in self.stored:
            return -1
        data = self.stored[unit]
        if len(data) > len(into):
            return None
        into[: len(data)] = data
        return len(data)


def tiles_of(array: Array, count: int = 4, *, learned: bool = True) -> StoredTiles:
    return StoredTiles(array, lambda tile: (0, tile), b"fill", tiles=count, slot=SLOT, trailer=4,
                       reencode=lambda tile: b"again %d" % tile, skippable=True, learned=learned)


def test_the_tables_are_the_stored_sizes_learned_as_read() -> None:
    """Nothing is asked of the store until a table is read; then the sizes of its tiles'
    block, at once; offsets are the slots', but for chunks not stored (the fill tile, after
    every slot); a chunk too long for its slot is a tile encoded again."""
    array = Array({(0, 0): bytes(range(100)), (0, 2): bytes(50), (0, 3): bytes(200)})
    tiles = tiles_of(array)
    assert tiles.sizes is not None
    offsets, counts = Learned(4, tiles.sizes, True), Learned(4, tiles.sizes, False)
    assert counts.values_now(0, 4) is None and offsets.values_now(0, 4) is None and array.sized == []
    assert counts.values(1, 3).tolist() == [4, 50]  # (tile 1: the fill tile, 4 bytes)
    assert array.sized == [[(0, 0), (0, 1), (0, 2), (0, 3)]]  # (one look, at the whole block)
    assert offsets.values_now(0, 4).tolist() == [0, 4 * SLOT, 2 * SLOT, 3 * SLOT]  # type: ignore[union-attr]
    assert counts.values(0, 4).tolist() == [100, 4, 50, len(b"again 3")]
    assert offsets.part(2, 4).shifted(1000).values(0, 2).tolist() == [1000 + 2 * SLOT, 1000 + 3 * SLOT]
    assert len(array.sized) == 1 and array.fetched == []
    tiles.forget()  # (an open: learned again)
    assert counts.values_now(0, 4) is None


def test_a_tile_is_its_stored_bytes_then_zeros() -> None:
    """A tile's slot holds its stored bytes, less the checksum, then zeros; the fill tile's
    slot, the fill tile; a tile is fetched once and kept, then fetched again after `forget`."""
    array = Array({(0, 0): bytes(range(100)), (0, 3): bytes(200)})
    tiles = tiles_of(array)
    assert bytes(tiles.read(0, 0, SLOT)) == bytes(range(100)) + bytes(SLOT - 100)
    assert bytes(tiles.held(0, 96, 8) or b"") == bytes(range(96, 100)) + bytes(4)
    whole = tiles.read(0, 0, 100)
    assert isinstance(whole, memoryview) and bytes(whole) == bytes(range(100))  # (a view of what is kept)
    assert bytes(tiles.read(4, 0, 8)) == b"fill" + bytes(4)  # (slot 4: the fill tile)
    assert bytes(tiles.read(3, 0, 8)) == b"again 3" + bytes(1)
    assert array.fetched == [(0, 0), (0, 3)]
    tiles.forget()
    assert tiles.held(0, 0, 8) is None
    assert bytes(tiles.read(0, 0, 8)) == bytes(range(8)) and array.fetched[-1] == (0, 0)


def test_a_local_tile_is_read_now_into_the_buffer_with_zeros_after_it() -> None:
    """A tile in the page cache is read into the thread's buffer, zeros after it (whatever a
    longer tile left there), and serves the tile's next request; one whose size is not what
    the tables said, or would wait, is left to a worker (None)."""
    array = Array({(0, 0): bytes(range(100)), (0, 1): b"\x07" * 50})
    array.cached = True
    tiles = tiles_of(array)
    assert tiles.sizes is not None
    assert bytes(tiles.held(0, 0, SLOT) or b"") == bytes(range(100)) + bytes(SLOT - 100)
    assert bytes(tiles.held(1, 0, SLOT) or b"") == b"\x07" * 50 + bytes(SLOT - 50)
    array.cached = False
    assert bytes(tiles.held(1, 40, 20) or b"") == b"\x07" * 10 + bytes(10)  # (from the buffer)
    assert tiles.held(0, 0, 8) is None
    assert tiles.sizes.sizes(0, 4, wait=True).tolist() == [100, 50, -1, -1]  # type: ignore[union-attr]
    array.cached = True
    array.stored[(0, 1)] = b"\x08" * 60 + b"crc!"  # (another writer, since the tables were read)
    assert tiles.held(1, 0, 8) is None
    assert bytes(tiles.held(0, 0, 4) or b"") == bytes(range(4))


def test_a_tile_changed_since_its_size_was_given_fits_it_or_fails() -> None:
    """Another writer's chunk, read after the tables gave the old size: shorter, it is padded
    as zstd's readers allow (a skippable frame); longer, its read fails (EIO), never a tile cut
    short."""
    array = Array({(0, 0): bytes(range(100)), (0, 1): bytes(range(50))})
    tiles = tiles_of(array)
    assert tiles.sizes is not None
    tiles.sizes.sizes(0, 2, wait=True)
    array.stored[(0, 0)] = bytes(80) + b"crc!"
    array.stored[(0, 1)] = bytes(60) + b"crc!"
    frame = b"\x50\x2a\x4d\x18" + (100 - 80 - 8).to_bytes(4, "little")
    assert bytes(tiles.read(0, 0, 100)) == bytes(80) + frame + bytes(12)
    with pytest.raises(ChunkError):
        tiles.read(1, 0, 50)


def test_uncompressed_tiles_learn_nothing() -> None:
    """Without learned sizes (uncompressed tiles, each as long as its slot), a tile not stored
    is the fill tile in its own slot, and no size is ever asked for."""
    array = Array({(0, 0): bytes(range(100))})
    tiles = tiles_of(array, learned=False)
    assert tiles.sizes is None
    assert bytes(tiles.read(1, 0, 8)) == b"fill" + bytes(4)
    array.cached = True
    assert bytes(tiles.held(2, 0, 8) or b"") == b"fill" + bytes(4)
    assert array.sized == []


def test_a_header_makes_learned_tables_only_as_read() -> None:
    """Lazy tables are made when read, each from a page of its own (a reader of pages reads the
    same tiles' offsets and counts), and even one small enough for its IFD entry (one tile);
    a read that would wait gives None unless it may wait."""
    array = Array({(0, n): bytes(10 + n % 100) for n in range(3 * BLOCK)})
    tiles = tiles_of(array, 3 * BLOCK)
    assert tiles.sizes is not None
    count = 3 * BLOCK
    big = TiffImage((Tag.long(IMAGE_WIDTH, 16),), Learned(count, tiles.sizes, True),
                    Learned(count, tiles.sizes, False), tiled=True)
    one = TiffImage((Tag.long(IMAGE_WIDTH, 16),), Learned(1, tiles.sizes, True),
                    Learned(1, tiles.sizes, False), tiled=True)
    header = tiff_header([big, one], (count + 1) * SLOT)
    assert array.sized == []
    placed = sorted((p for p in header.tables if p.end - p.at > 4), key=lambda p: p.at)
    assert [p.at % 4096 for p in placed] == [0, 0]
    first, second = placed
    assert header.read(second.at + 4 * (BLOCK + 1), 8, wait=False) is None
    got = np.frombuffer(header.read(second.at + 4 * (BLOCK + 1), 8) or b"", "<u4").tolist()
    assert got == [10 + (BLOCK + 1) % 100, 10 + (BLOCK + 2) % 100]
    assert len(array.sized) == 1 and len(array.sized[0]) == BLOCK
    assert header.read(first.at + 4 * BLOCK, 4, wait=False) is not None  # (that block: learned)
    assert header.read(0, 4096, wait=False) is None  # (the one tile's count, in its IFD entry)
    assert header.read(0, 4096) is not None and len(array.sized) == 2
