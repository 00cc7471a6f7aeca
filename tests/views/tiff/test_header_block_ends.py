"""No range geotiff.js 2 reads of data.tif's header ends on a multiple of 64 KiB, without FUSE:
its block cache waits for ever on the block after one (`reader_blocks`). The ranges are those
it reads with exact lengths (`tiff_exact_reads`): each IFD's first KiB (4048 bytes in a
BigTIFF), each IFD, each tag's values outside its entry (tile and strip tables, strings,
GeoTIFF's keys and numbers), followed through the chain and SubIFDs. Files of many pages, of
many small tables and of one large table, each built so that one of those ranges ended on a
block before the header kept them off; every position of an IFD and of a table across a block,
classic and BigTIFF; the files read by tifffile, libtiff (`tiffinfo`) and GDAL."""

from __future__ import annotations

import io
import subprocess
from pathlib import Path

import numpy as np
import pytest
import tifffile
import zarr

from tests.helpers.tiff_exact_reads import ExactRead, exact_reads
from tests.helpers.tiff_view_reader import ViewReader, array_tiff
from zarrfs.views.placement.core import NOWHERE, Placement
from zarrfs.views.tiff.array_file import TiffFile
from zarrfs.views.tiff.directories import (
    IMAGE_DESCRIPTION,
    TILE_OFFSETS,
    Tag,
    TiffHeader,
    TiffImage,
    tiff_header,
)
from zarrfs.views.tiff.tables import Given

pytestmark = pytest.mark.fast

BLOCK = 1 << 16
PLACED = Placement(geotransform=(500000.0, 10.0, 0.0, 5000000.0, 0.0, -10.0), crs="EPSG:32632")

# (shape, chunks, strips, placement): what ended on a block before, in a header laid out
# piece after piece, word-aligned (tables after every IFD, 8-aligned):
CASES = {
    # 1677 pages of 7 samples: IFDs 234 bytes apart from byte 8, the last one's first KiB
    # read ended at 6 blocks (8 + 234 * 1676 + 1024 = 393216)
    "ifd": ((1677, 7, 16, 16), (1, 7, 16, 16), False, NOWHERE),
    # 320 pages of 2 planes: tile tables of 8 bytes each, 8-aligned, after the IFDs, the one
    # across 64 KiB ended on it
    "page tables": ((320, 2, 32, 32), (1, 1, 32, 32), False, NOWHERE),
    # 16 x 1021 tiles: TileOffsets (4 bytes a tile) from byte 192 ended at 64 KiB
    "large table": ((256, 16336), (16, 16), False, NOWHERE),
    # and without a piece that did: strips of many pages, GeoTIFF tags on many pages
    "strips": ((400, 3, 40, 40), (1, 1, 20, 20), True, NOWHERE),
    "geotiff": ((300, 2, 64, 64), (1, 1, 32, 32), False, PLACED),
}


def on_blocks(reads: list[ExactRead]) -> list[ExactRead]:
    return [read for read in reads if read.end % BLOCK == 0]


def header_reads(tif: TiffFile | TiffHeader) -> list[ExactRead]:
    return exact_reads(lambda offset, size: bytes(tif.read(offset, size) or b""))


@pytest.mark.parametrize("case", CASES)
def test_no_header_read_of_data_tif_ends_on_a_block(tmp_path: Path, case: str) -> None:
    shape, chunks, strips, placement = CASES[case]
    array = zarr.create_array(tmp_path / "a.zarr", shape=shape, chunks=chunks, dtype="uint8", fill_value=7)
    array[(0,) * (len(shape) - 2) + (slice(0, 16), slice(0, 16))] = 9  # (the first tile, stored)
    tif = array_tiff(tmp_path / "a.zarr", strips=strips, placement=placement)
    reads = header_reads(tif)
    pages = int(np.prod(shape[:-3]))
    assert sum(read.what.startswith("first") for read in reads) == pages
    assert not on_blocks(reads), on_blocks(reads)
    assert max(read.end for read in reads if not read.what.startswith("first")) > BLOCK  # (reads past one)
    with tifffile.TiffFile(io.BufferedReader(ViewReader(tif, 1 << 20), 1 << 16)) as tiff:
        assert len(tiff.pages) == pages
        first, last = tiff.pages[0], tiff.pages[-1]
        first_piece = tif.read(int(first.dataoffsets[0]), int(first.databytecounts[0]))
        last_piece = tif.read(int(last.dataoffsets[-1]), int(last.databytecounts[-1]))
    assert first_piece[0] == 9 and set(bytes(last_piece)) == {7}  # (uncompressed: decoded)
    gdal_said = assert_libtiff_and_gdal_read(tif, tmp_path / "header.tif", pages, shape[-2:])
    assert (placement is NOWHERE) != ("Origin = (500000.0" in gdal_said)


def assert_libtiff_and_gdal_read(tif: TiffFile, path: Path, pages: int, size: tuple[int, ...]) -> str:
    """libtiff and GDAL read every IFD of the header (a file of its bytes, the data left
    sparse); what gdalinfo says of the last page."""
    with open(path, "wb") as file:
        file.write(bytes(tif.read(0, tif.data_start)))
        file.truncate(tif.size)
    said = subprocess.run(["tiffinfo", str(path)], capture_output=True, text=True, check=True)
    assert said.stdout.count("TIFF Directory at offset") == pages, said.stderr
    assert "error" not in said.stderr.lower(), said.stderr
    last_page = f"GTIFF_DIR:{pages}:{path}"
    info = subprocess.run(["gdalinfo", last_page], capture_output=True, text=True, check=True)
    assert f"Size is {size[1]}, {size[0]}" in info.stdout and "ERROR" not in info.stderr, info.stderr
    return info.stdout


class LazyGiven(Given):
    """A table made only as read (as a table of sizes learned from the store): a page of its own."""

    lazy = True


def two_images(description: int, tiles: int, lazy: bool) -> list[TiffImage]:
    """An image with a description of `description` bytes (moving what follows it), and one
    of `tiles` tiles (its byte counts made as read, `lazy`)."""
    counts = (LazyGiven if lazy else Given).of(np.full(tiles, 4096, np.uint64))  # (as learned sizes are)
    tags = (Tag.long(256, 64), Tag.long(257, 64), Tag.shorts(258, 8), Tag(322, 4, (16,)), Tag(323, 4, (16,)))
    first = TiffImage((*tags, Tag.ascii(IMAGE_DESCRIPTION, "d" * description)),
                      Given.of(np.zeros(1, np.uint64)), Given.of(np.ones(1, np.uint64)), True)
    return [first, TiffImage(tags, Given.of(np.arange(tiles, dtype=np.uint64) * 4096), counts, True)]


# (tiles of the second image, its byte counts made as read, descriptions): the second IFD's
# first read and its end, its small tables; a large table, 8-aligned, across 128 KiB; byte counts
# made as read, half a block long, starting a page of their own after offsets as long from 64 KiB
# (so ending at 128 KiB): each across a block.
SWEEPS = [(17, False, range(BLOCK - 4400, BLOCK + 300)), (16 * 1024 - 40, False, range(BLOCK - 800, BLOCK)),
          (8 * 1024, True, range(BLOCK - 600, BLOCK - 300))]


@pytest.mark.parametrize("big", [False, True], ids=["classic", "bigtiff"])
def test_every_position_of_an_ifd_or_a_table_ends_off_blocks(big: bool) -> None:
    """The second IFD and its tables moved a word at a time, by the description before them,
    across 64 KiB: no read ends on a block, and the header reads as the same TIFF."""
    for tiles, lazy, descriptions in SWEEPS:
        tiles //= 2 if big else 1  # (tables of 8-byte values)
        for description in descriptions:
            header = tiff_header(two_images(description, tiles, lazy), 1 << 40 if big else 1 << 20)
            assert header.big == big
            reads = header_reads(header)
            assert not on_blocks(reads), (description, tiles, on_blocks(reads))
        with tifffile.TiffFile(io.BytesIO(header.read(0, header.data_start) or b"")) as tiff:
            assert [len(page.dataoffsets) for page in tiff.pages] == [1, tiles]
            assert tiff.pages[0].description == "d" * description  # type: ignore[union-attr]
            offsets = np.asarray(tiff.pages[1].tags[TILE_OFFSETS].value) - header.data_start  # type: ignore[union-attr]
            assert list(offsets) == list(range(0, tiles * 4096, 4096))
