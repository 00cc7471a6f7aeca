"""`-o tiff=strips` (issue 82): the TIFF views in uncompressed strips of whole rows of chunks,
for readers that read no tiles. Arrays and groups written with zarr-python 3's defaults (v3:
zstd; sharded; v2: zstd, and blosc, zarr-python 2's default), an OME-Zarr image's
`data.ome.tif` and a GeoZarr pyramid's `data.tif`, read through real mounts by ImageJ 1.x
(its own TIFF reader, headless), OpenCV, Pillow, tifffile without imagecodecs, GDAL and
libtiff, each compared with what zarr-python reads."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tifffile
import zarr

from tests.helpers.mounting import mount_stats as stats
from tests.helpers.tiff_readers import READERS, SOURCES, Mounted, mount_all, written
from zarrfs.views.tiff.layout import LEAD

__all__ = ["written"]  # (the fixture: the same arrays, written by zarr-python, used by name)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

STRIPS = ["ro", "tiff=strips"]
# ImageJ 1.x's own reader (`File > Open` headless): each file's first image, its width,
# height and every pixel (as float32, exact for 16-bit values) written big-endian to a file.
IMAGEJ_READER = """
import ij.ImagePlus;
import ij.io.Opener;
import ij.process.ImageProcessor;
import java.io.*;

public class ReadAll {
    public static void main(String[] args) throws IOException {
        for (int i = 0; i < args.length; i += 2) {
            ImagePlus image = new Opener().openImage(args[i]);
            try (DataOutputStream out = new DataOutputStream(new BufferedOutputStream(
                    new FileOutputStream(args[i + 1])))) {
                if (image == null) continue;  // (not opened: an empty file)
                ImageProcessor pixels = image.getProcessor();
                out.writeInt(image.getWidth());
                out.writeInt(image.getHeight());
                for (int p = 0; p < image.getWidth() * image.getHeight(); p++) out.writeFloat(pixels.getf(p));
            }
        }
    }
}
"""


@pytest.fixture(scope="module")
def strips_mount(written: Path) -> Iterator[Mounted]:
    yield from mount_all(written, STRIPS)


def file_of(mount: Mounted, name: str) -> Path:
    return mount.mounts[name] / ("data.ome.tif" if name == "image" else "data.tif")


def first_image(mount: Mounted, name: str) -> np.ndarray[Any, Any]:
    """What zarr-python reads of the first image of `name`'s TIFF file."""
    if name == "image":
        return mount.image_level(0)[0]  # (the first channel at full resolution)
    return mount.values(name, "0" if name == "geo" else "")


@pytest.fixture(scope="module")
def imagej_reads(strips_mount: Mounted,
                 tmp_path_factory: pytest.TempPathFactory) -> dict[str, np.ndarray[Any, Any]]:
    """ImageJ 1.x's pixels of every source's file, read in one run of ImageJ."""
    tmp = tmp_path_factory.mktemp("imagej")
    (tmp / "ReadAll.java").write_text(IMAGEJ_READER)
    outputs = {name: tmp / f"{name}.bin" for name in SOURCES}
    arguments = [str(path) for name in SOURCES for path in (file_of(strips_mount, name), outputs[name])]
    command = ["java", "-Djava.awt.headless=true", "-cp", "/usr/share/java/ij.jar", str(tmp / "ReadAll.java")]
    subprocess.run([*command, *arguments], capture_output=True, text=True, timeout=300, check=True)
    return {name: _imagej_pixels(path.read_bytes()) for name, path in outputs.items()}


def _imagej_pixels(found: bytes) -> np.ndarray[Any, Any]:
    assert found, "ImageJ opened no image"
    width, height = np.frombuffer(found[:8], ">i4")
    return np.frombuffer(found[8:], ">f4").reshape(height, width)


@pytest.mark.parametrize("name", SOURCES)
def test_imagej_opens_strips_of_default_arrays_and_groups(imagej_reads: dict[str, np.ndarray[Any, Any]],
                                                          strips_mount: Mounted, name: str) -> None:
    """ImageJ 1.x reads no tiles ("Unsupported format" on a default mount); with strips it
    opens every array and group file, each pixel zarr-python's."""
    assert np.array_equal(imagej_reads[name], first_image(strips_mount, name))


@pytest.mark.parametrize("reader", list(READERS))
@pytest.mark.parametrize("name", SOURCES)
def test_every_reader_opens_strips(strips_mount: Mounted, tmp_path: Path, name: str, reader: str) -> None:
    found = READERS[reader](file_of(strips_mount, name), tmp_path)
    assert np.array_equal(found, first_image(strips_mount, name))


def test_every_image_and_level_is_in_strips(strips_mount: Mounted) -> None:
    """The OME-TIFF's planes and their levels (SubIFDs), and the COG's overviews: strips,
    uncompressed, equal to zarr-python's levels."""
    with tifffile.TiffFile(file_of(strips_mount, "image")) as tiff:
        levels = tiff.series[0].levels
        pages = [page.aspage() for level in levels for page in level.pages]  # type: ignore[union-attr]
        assert {(page.is_tiled, page.compression) for page in pages} == {(False, 1)}
        for number, level in enumerate(levels):
            assert np.array_equal(level.asarray(), strips_mount.image_level(number))
    with tifffile.TiffFile(file_of(strips_mount, "geo")) as tiff:
        assert {(page.is_tiled, page.compression) for page in tiff.pages} == {(False, 1)}  # type: ignore[union-attr]
        for number, page in enumerate(tiff.pages):
            assert np.array_equal(page.asarray(), strips_mount.values("geo", str(number)))  # type: ignore[union-attr]


# (shape, chunks, rows per strip): one row of chunks in a strip; as many as fit in 1 MiB; part
# of a row of chunks larger than 1 MiB (300 rows of 8 KiB: 100, the largest divisor that fits).
STRIP_CASES = [((1000, 1200), (256, 256), 256), ((3000, 600), (64, 64), 832), ((700, 4096), (300, 512), 100)]


@pytest.mark.fast
@pytest.mark.parametrize(("shape", "chunks", "rows"), STRIP_CASES, ids=["row", "rows", "part"])
def test_a_strip_is_whole_rows_of_chunks_read_once(tmp_path: Path, mount_array: Any, shape: tuple[int, int],
                                                   chunks: tuple[int, int], rows: int) -> None:
    """RowsPerStrip follows the rows of chunks, the strips are the flat bytes in order (none
    ending on 64 KiB: `layout.LEAD` zeros before it where it would); libtiff
    (tiffinfo, tiffcp) reads them, and copying the image decodes each chunk once."""
    data = np.random.default_rng(2).integers(1, 4000, shape).astype("uint16")
    array = zarr.create_array(tmp_path / "a.zarr", shape=shape, dtype="uint16", chunks=chunks, fill_value=0)
    array[...] = data
    mount = mount_array(tmp_path / "a.zarr", STRIPS)
    tif = mount.path / "data.tif"
    with tifffile.TiffFile(tif) as tiff:
        page = tiff.pages[0]
        assert not page.is_tiled and page.rowsperstrip == rows  # type: ignore[union-attr]
        counts, offsets = np.array(page.databytecounts), np.array(page.dataoffsets)  # type: ignore[union-attr]
    row_bytes = shape[1] * 2
    assert set(counts[:-1]) == {rows * row_bytes} and counts.sum() == data.nbytes
    # (one after another, the flat bytes, but for a few zeros before a strip that would end on 64 KiB)
    assert set(np.diff(offsets) - counts[:-1]) <= {0, LEAD} and not any((offsets + counts) % (1 << 16) == 0)
    info = subprocess.run(["tiffinfo", str(tif)], check=True, capture_output=True, text=True).stdout
    assert f"Rows/Strip: {rows}" in info and "Tile" not in info
    copy = tmp_path / "copy.tif"
    subprocess.run(["tiffcp", str(tif), str(copy)], check=True, timeout=120)
    assert np.array_equal(tifffile.imread(copy), data)
    grid = [-(-size // edge) for size, edge in zip(shape, chunks, strict=True)]
    assert stats(mount.path)["chunks_decoded"] == grid[0] * grid[1]


def test_tiles_stay_the_default(tmp_path: Path, mount_array: Any) -> None:
    """`tiff=tiles` (the default) keeps a tile a chunk."""
    zarr.create_array(tmp_path / "a.zarr", shape=(64, 96), dtype="uint16", chunks=(32, 32))[...] = 7
    for options in (["ro"], ["ro", "tiff=tiles"]):
        with tifffile.TiffFile(mount_array(tmp_path / "a.zarr", options).path / "data.tif") as tiff:
            assert tiff.pages[0].is_tiled and tiff.pages[0].tilelength == 32  # type: ignore[union-attr]
