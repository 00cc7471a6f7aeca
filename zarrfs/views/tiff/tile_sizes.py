"""The tile tables of `data.tif`'s compressed stored tiles: each tile's byte count is its chunk's
stored size, learned from the store when a reader reads the tables there, never before (a
stat, an open or the file's layout cost nothing).

Tiles are learned a block at a time (`BLOCK`, a page of a table): the tables start pages of
their own (`directories.TABLE_PAGE`), so a reader that reads them a page at a time as it needs
a tile (libtiff, GDAL) learns the tiles of that page, in one look at their chunks
(`ZarrArray.stored_sizes`: a stat each locally, HEADs or listings of their rows on object
stores, a shard's index), and a reader that reads them whole (tifffile, Bio-Formats) learns
every tile in a few such looks, each at once. Offsets stay the tiles' slots (the file's size
needs no store), but for chunks not stored, which point at the one fill tile after them, and
for a tile that would end on a block (`layout.READER_BLOCK`): it starts `layout.LEAD` bytes in."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from .layout import leads
from .tables import TagTable

UNKNOWN, MISSING = -2, -1  # (a tile's size not learned yet; its chunk not stored)
BLOCK = 512  # tiles learned together: a 4 KiB page of BigTIFF's table (two of classic TIFF's)


class TileSizes:
    """The stored size of each of `tiles` tiles (less any trailer), as `learn` finds them
    (tile -> size, for the tiles stored), each tile in a slot of `slot` bytes, then the fill
    tile, `fill` bytes long, in slot `tiles`."""

    def __init__(self, tiles: int, slot: int, fill: int,
                 learn: Callable[[Sequence[int]], Mapping[int, int]]) -> None:
        self.tiles = tiles
        self.slot = slot
        self.fill = fill
        self._learn = learn
        self._blocks: dict[int, np.ndarray] = {}
        self._learning = threading.Lock()  # (one look at the store at a time: each is concurrent)

    def size(self, tile: int) -> int:
        """A tile's learned size, MISSING, or UNKNOWN."""
        block = self._blocks.get(tile // BLOCK)
        return UNKNOWN if block is None else int(block[tile % BLOCK])

    def forget(self) -> None:
        """Learn each tile again when it is next read (an open's close-to-open recheck)."""
        self._blocks = {}

    def sizes(self, start: int, stop: int, *, wait: bool) -> np.ndarray | None:
        """Sizes of tiles [start, stop) (MISSING where not stored); None when they are not
        learned yet and not `wait`."""
        first, last = start // BLOCK, -(-stop // BLOCK)
        blocks = self._blocks
        if any(number not in blocks for number in range(first, last)):
            if not wait:
                return None
            self._learn_blocks(blocks, first, last)
        joined = np.concatenate([blocks[number] for number in range(first, last)])
        return joined[start - first * BLOCK : stop - first * BLOCK]

    def _learn_blocks(self, blocks: dict[int, np.ndarray], first: int, last: int) -> None:
        with self._learning:
            wanted = [number for number in range(first, last) if number not in blocks]
            tiles = [tile for number in wanted
                     for tile in range(number * BLOCK, min((number + 1) * BLOCK, self.tiles))]
            found = self._learn(tiles) if tiles else {}
            for number in wanted:
                block = np.full(BLOCK, MISSING, dtype=np.int64)
                for tile in range(number * BLOCK, min((number + 1) * BLOCK, self.tiles)):
                    block[tile - number * BLOCK] = found.get(tile, MISSING)
                blocks[number] = block

    def offsets(self, sizes: np.ndarray, start: int) -> np.ndarray:
        """The offsets (in the part's data) of tiles from `start` of these `sizes`."""
        slots = np.arange(start, start + len(sizes), dtype=np.int64) * self.slot
        places = np.where(sizes == MISSING, self.tiles * self.slot, slots)
        return np.asarray(places + leads(places, self.counts(sizes).astype(np.int64)), dtype=np.uint64)

    def counts(self, sizes: np.ndarray) -> np.ndarray:
        return np.where(sizes == MISSING, self.fill, sizes).astype(np.uint64)


@dataclass(frozen=True)
class Learned(TagTable):
    """TileOffsets (`offsets`) or TileByteCounts of tiles [first, first + length), made from
    their learned sizes as read."""

    sizes: TileSizes
    offsets: bool
    first: int = 0
    add: int = 0  # (offsets: where the part's data starts)

    lazy = True

    def values(self, start: int, stop: int) -> np.ndarray:
        found = self._made(start, stop, wait=True)
        assert found is not None
        return found

    def values_now(self, start: int, stop: int) -> np.ndarray | None:
        return self._made(start, stop, wait=False)

    def part(self, start: int, stop: int) -> Learned:
        return replace(self, length=stop - start, first=self.first + start)

    def shifted(self, by: int) -> Learned:
        return replace(self, add=self.add + by) if self.offsets else self

    def _made(self, start: int, stop: int, *, wait: bool) -> np.ndarray | None:
        sizes = self.sizes.sizes(self.first + start, self.first + stop, wait=wait)
        if sizes is None:
            return None
        if not self.offsets:
            return self.sizes.counts(sizes)
        return self.sizes.offsets(sizes, self.first + start) + np.uint64(self.add)
