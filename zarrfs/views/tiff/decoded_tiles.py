"""The tiles of `data.tif` that are decoded chunks (`parts`): a request of a whole tile decodes
it on the thread that answers it and keeps it nowhere (its memory goes to the next tile); the
first request of part of a tile not in the array's cache decodes it whole the same way and
keeps its bytes in HELD_TILES (`stored_tiles`: one budget for the tiles kept of every file),
so that the requests of the rest of it (`dd bs=1M`: a request ends part-way into a tile, as no
tile ends on a block), and of all of it again, are answered from what was kept, without a
worker thread. A tile the cache holds whole (this mount's writes) is read from there.

A kept tile is found by the array's `changes` as they were before it was decoded: a write (of
this mount, through any file) or another writer's change found by a recheck makes them
differ, and the tile is decoded again; an open's close-to-open recheck forgets them all
(`forget`), as it does the stored tiles. Tiles larger than KEPT_TILE_BYTES, and tiles whose
read chunks hold several planes, read in parts are read through the array's cache (within its
bound), decoded once there."""

from __future__ import annotations

from collections.abc import Hashable

from ..files import StoredArray
from ..region_file import RegionFile
from .layout import TileBoxes
from .stored_tiles import HELD_TILES

# The largest tile kept: HELD_TILES holds 16 at least, and never more than its budget.
KEPT_TILE_BYTES = HELD_TILES.budget // 16


class DecodedTiles:
    """Tile n is the elements of `boxes[n]`, in `byteorder`, `tile_bytes` long."""

    def __init__(self, array: StoredArray, boxes: TileBoxes, byteorder: str, tile_bytes: int) -> None:
        self._array = array
        self._boxes = boxes
        self._byteorder = byteorder
        self._leading = array.read_chunk_shape[:-2]
        self._whole_chunks = all(edge == 1 for edge in self._leading)  # (a tile is a read chunk)
        self._keeps = self._whole_chunks and tile_bytes <= KEPT_TILE_BYTES
        self._tiles = object()  # (these tiles' key in HELD_TILES)

    def read(self, tile: int, at: int, count: int) -> bytes | memoryview:
        """Bytes [at, at + count) of the tile (within it)."""
        region = self._region(tile)
        whole = at == 0 and count >= region.size
        if not (self._keeps or (whole and self._whole_chunks)):
            return region.read(at, count)  # (a part of a tile not kept: through the cache)
        key = self._key(tile)  # (the changes before the decode: a write during it misses)
        found = HELD_TILES.get(key) if self._keeps else None
        if found is not None:
            return memoryview(found)[at : at + count]
        if not whole and self._array.cached([self._boxes[tile]]):
            return region.read(at, count)
        decoded = region.in_file_order(self._array.read_unit(self._boxes.chunk(tile, self._leading)))
        if whole:
            return decoded
        HELD_TILES.put(key, decoded)
        return decoded[at : at + count]

    def held(self, tile: int, at: int, count: int) -> bytes | memoryview | None:
        """The bytes, if kept or in the array's cache (then no wait), else None."""
        return self._kept(tile, self._region(tile), at, count)

    def forget(self) -> None:
        """Decode each tile again when it is next read in parts (the ones kept age out)."""
        self._tiles = object()

    def _kept(self, tile: int, region: RegionFile, at: int, count: int) -> bytes | memoryview | None:
        found = HELD_TILES.get(self._key(tile)) if self._keeps else None
        if found is not None:
            return memoryview(found)[at : at + count]
        # (a box within one read chunk: cached whole, or a read of it may wait)
        return region.read(at, count) if self._array.cached([self._boxes[tile]]) else None

    def _key(self, tile: int) -> Hashable:
        return self._tiles, tile, self._array.changes

    def _region(self, tile: int) -> RegionFile:
        return RegionFile(self._array, self._boxes[tile], self._byteorder)
