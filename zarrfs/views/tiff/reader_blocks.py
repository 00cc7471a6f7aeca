"""What geotiff.js 2 (Viv's, so Avivator's) asks of where a TIFF's pieces lie: that none of the
ranges it reads ends on a multiple of `READER_BLOCK`. Its cache of 64 KiB blocks, for a range
that ends exactly on a block's edge, waits also on the block after it and never fetches it
(geotiff.js issues 262 and 374, fixed in 3.0). It reads tiles and strips at their byte counts,
and the header so (`GeoTIFF.parseFileDirectoryAt`): at each IFD `IFD_FIRST_READ` bytes, then
the whole IFD (its entry count, entries and next IFD's offset) where that is longer, then each
tag's values outside its entry at their offset and exact length."""

from __future__ import annotations

from collections.abc import Iterable

READER_BLOCK = 1 << 16
IFD_FIRST_READ = {False: 1024, True: 4048}  # (by BigTIFF: its first read of an IFD)


def clear_of_block_ends(where: int, lengths: Iterable[int], step: int) -> int:
    """The first of `where`, `where + step`, ... from which no range of one of `lengths` ends
    on a block (`step` below a block: a few steps, one per length at most)."""
    ends = tuple(lengths)
    while any((where + length) % READER_BLOCK == 0 for length in ends):
        where += step
    return where
