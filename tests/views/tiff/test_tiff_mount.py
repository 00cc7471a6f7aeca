"""data.tif through real mounts, read by the tools people open TIFFs with: GDAL (gdalinfo,
gdal_translate windows), libtiff (tiffinfo, tiffcp), tifffile (whole, and tile by tile
through its zarr interface), OpenCV and ImageJ; what the mount decodes for them."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import cv2
import numcodecs
import numpy as np
import pytest
import tifffile
import xarray as xr
import zarr
from zarr.codecs import BloscCodec, ZstdCodec

from tests.helpers.geo_sources import UTM33, gdalinfo, to_zarr, weather
from tests.helpers.mounting import mount_stats as stats
from tests.helpers.mounting import wait_until

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def image(path: Path, shape: tuple[int, ...], chunks: tuple[int, ...], **kwargs: Any) -> np.ndarray[Any, Any]:
    data = np.random.default_rng(3).integers(0, 4000, shape).astype("uint16")
    array = zarr.create_array(path, shape=shape, dtype="uint16", chunks=chunks, fill_value=0, **kwargs)
    array[...] = data
    return data


@pytest.mark.parametrize("fmt", [2, 3], ids=["v2", "v3"])
def test_gdal_sees_what_data_vrt_says(tmp_path: Path, mount_array: Any, fmt: int) -> None:
    mount = mount_array(to_zarr(weather(), tmp_path / "weather.zarr", fmt), ["ro"])
    for name in ("t2m", "sp", "mask"):
        vrt, tif = gdalinfo(mount.path / name / "data.vrt"), gdalinfo(mount.path / name / "data.tif")
        assert tif["geoTransform"] == vrt["geoTransform"]
        assert 'ID["EPSG",4326]' in tif["coordinateSystem"]["wkt"]
        keys = ("description", "noDataValue", "unit", "scale", "offset", "type")
        described = [[band.get(k) for k in keys] for band in tif["bands"]]
        assert described == [[band.get(k) for k in keys] for band in vrt["bands"]]
        copy = tmp_path / f"{name}.tif"
        subprocess.run(["gdal_translate", "-q", str(mount.path / name / "data.tif"), str(copy)], check=True)
        want = zarr.open_array(tmp_path / "weather.zarr" / name, mode="r")[...]
        assert np.array_equal(tifffile.imread(copy).reshape(want.shape), want, equal_nan=True)


def test_projected_crs_by_code_and_by_wkt(tmp_path: Path, mount_array: Any) -> None:
    x, y = 500000.0 + 1000.0 * np.arange(32), 5000000.0 - 1000.0 * np.arange(16)
    unnamed = re.sub(r',\s*AUTHORITY\["EPSG","\d+"\]\]$', "]", UTM33)  # the same CRS with no code
    variables = {name: (("y", "x"), np.ones((16, 32), "f4"), {"grid_mapping": crs})
                 for name, crs in (("coded", "crs"), ("uncoded", "crs_wkt"))}
    mappings = {"crs": ((), 0, {"crs_wkt": UTM33}), "crs_wkt": ((), 0, {"crs_wkt": unnamed})}
    ds = xr.Dataset({**variables, **mappings}, coords={"x": x, "y": y})
    mount = mount_array(to_zarr(ds, tmp_path / "utm.zarr", 3), ["ro"])
    coded = gdalinfo(mount.path / "coded" / "data.tif")
    assert coded["geoTransform"] == [499500.0, 1000.0, 0.0, 5000500.0, 0.0, -1000.0]
    assert coded["coordinateSystem"]["wkt"].rstrip().endswith('ID["EPSG",32633]]')
    uncoded = gdalinfo(mount.path / "uncoded" / "data.tif")["coordinateSystem"]["wkt"]
    assert "UTM zone 33N" in uncoded and "Transverse_Mercator" in uncoded.replace(" ", "_")


def test_tiles_pass_through_to_tile_readers(tmp_path: Path, mount_array: Any) -> None:
    """A tile is its chunk's stored bytes, nothing after them, and its byte count their length
    (learned as the tables are read: no chunk's bytes fetched); a tile read costs those bytes;
    whole-file, window and tile-by-tile readers get the stored zstd tiles, and the mount decodes
    nothing (zstd tiles pass through with `filters=plugins`: tests/views/tiff/test_tiff_readers.py)."""
    data = image(tmp_path / "a.zarr", (1000, 1200), (256, 256), compressors=ZstdCodec(level=1))
    mount = mount_array(tmp_path / "a.zarr", ["ro", "filters=plugins"])
    tif = mount.path / "data.tif"
    with tifffile.TiffFile(tif) as tiff:  # (it reads the header and both tables, and no tile)
        page = tiff.pages[0]
        offsets, counts = page.dataoffsets, page.databytecounts  # type: ignore[union-attr]
    assert stats(mount.path)["bytes_fetched"] == 0
    chunks = [(tmp_path / "a.zarr" / "c" / str(tile // 5) / str(tile % 5)).read_bytes() for tile in range(20)]
    assert list(counts) == [len(chunk) for chunk in chunks]
    wanted = [5 * row + column for row in (1, 2) for column in (1, 2, 3)]  # [300:600, 500:900]
    with open(tif, "rb", buffering=0) as f:
        for tile in wanted:
            assert os.pread(f.fileno(), counts[tile], offsets[tile]) == chunks[tile]
    fetched = sum(len(chunks[tile]) for tile in wanted)
    assert stats(mount.path)["bytes_fetched"] == fetched
    slot = 256 << 10  # (a tile's: 256x256 uint16 tiles, 128 KiB decoded, up to the bound)
    assert os.stat(tif).st_blksize == 4096 and all(offset % slot == 0 for offset in offsets)
    with open(tif, "rb") as f:  # (tile 17, not read yet, as buffered files and stdio read: blocks)
        f.seek(offsets[17])
        tile = f.read(counts[17])
        past = os.pread(f.fileno(), slot, offsets[17])[counts[17]:]
    assert tile == chunks[17]
    assert past == bytes(slot - int(counts[17]))  # (the rest of the slot: zeros, no other tile)
    assert stats(mount.path)["bytes_fetched"] == fetched + len(chunks[17])  # (that tile, once)
    with tifffile.imread(tif, aszarr=True) as tiles:
        assert np.array_equal(zarr.open_array(tiles, mode="r")[300:600, 500:900], data[300:600, 500:900])
    window_tif = tmp_path / "window.tif"
    subprocess.run(["gdal_translate", "-q", "-srcwin", "700", "100", "300", "500", str(tif), str(window_tif)],
                   check=True)
    assert np.array_equal(tifffile.imread(window_tif), data[100:600, 700:1000])
    assert np.array_equal(tifffile.imread(tif), data)
    assert stats(mount.path)["chunks_decoded"] == 0
    info = subprocess.run(["tiffinfo", str(tif)], check=True, capture_output=True, text=True).stdout
    assert "Tile Width: 256 Tile Length: 256" in info and "ZSTD" in info
    copy = tmp_path / "copy.tif"
    subprocess.run(["tiffcp", str(tif), str(copy)], check=True)
    assert np.array_equal(tifffile.imread(copy), data)


@pytest.mark.parametrize("filters", ["builtin", "plugins"])
def test_one_read_over_many_tiles_gets_each(tmp_path: Path, mount_array: Any, filters: str) -> None:
    """A read over several tiles (cp, cat: up to 1 MiB a request) gets every tile's bytes, as
    reads of one block each do; tiles of a sharded array too, and chunks that are not stored;
    decoded tiles (a default mount's) and zstd tiles as stored (`filters=plugins`)."""
    data = image(tmp_path / "a.zarr", (1000, 1200), (256, 256), compressors=ZstdCodec(level=1),
                 shards=(512, 512))
    zarr.open_array(tmp_path / "a.zarr", mode="r+")[:256, :512] = 0  # (two chunks not stored)
    data[:256, :512] = 0
    mount = mount_array(tmp_path / "a.zarr", ["ro", f"filters={filters}"])
    tif = mount.path / "data.tif"
    block, size = os.stat(tif).st_blksize, os.stat(tif).st_size
    with open(tif, "rb", buffering=0) as f:
        by_blocks = b"".join(os.pread(f.fileno(), block, at) for at in range(0, size, block))
        whole = os.pread(f.fileno(), size, 0)
    assert whole == by_blocks
    (tmp_path / "copy.tif").write_bytes(whole)
    assert np.array_equal(tifffile.imread(tmp_path / "copy.tif"), data)


@pytest.mark.parametrize("shards", [None, (512, 512)], ids=["plain", "sharded"])
def test_tile_readers_get_decoded_tiles_as_zarr_python_reads_them(tmp_path: Path, mount_array: Any,
                                                                  shards: tuple[int, int] | None) -> None:
    """A default mount's zstd tiles, decoded as each is read (a request a tile: tifffile's zarr
    interface tile by tile, GDAL's windows) and kept nowhere: each tile's chunk decoded once
    per read, the cache left empty; what they read is what zarr-python reads."""
    image(tmp_path / "a.zarr", (1000, 1200), (256, 256), compressors=ZstdCodec(level=1), shards=shards)
    want = zarr.open_array(tmp_path / "a.zarr", mode="r")[...]
    mount = mount_array(tmp_path / "a.zarr", ["ro"])
    tif = mount.path / "data.tif"
    corners = [(0, 0), (256, 768), (512, 1024), (768, 256)]  # (the last two: edge tiles)
    with tifffile.imread(tif, aszarr=True) as store:
        tiles = zarr.open_array(store, mode="r")
        for y, x in corners:
            assert np.array_equal(tiles[y : y + 256, x : x + 256], want[y : y + 256, x : x + 256])
    assert stats(mount.path)["chunks_decoded"] == len(corners)
    for number, (y, x) in enumerate(corners):  # (windows of a tile each, within the image)
        window, height, width = tmp_path / f"window{number}.tif", min(256, 1000 - y), min(256, 1200 - x)
        subprocess.run(["gdal_translate", "-q", "-srcwin", str(x), str(y), str(width), str(height), str(tif),
                        str(window)], check=True)
        assert np.array_equal(tifffile.imread(window), want[y : y + height, x : x + width])
    assert stats(mount.path)["chunks_decoded"] == 2 * len(corners)
    assert stats(mount.path)["cache_bytes"] == 0


def test_decoded_tiles_show_the_mounts_unsaved_writes(tmp_path: Path, mount_array: Any) -> None:
    """Chunks this mount wrote and has not stored (the writer's file still open) are read from
    the cache, whole or merged with the stored chunk, by a tile reader as by any other."""
    data = image(tmp_path / "a.zarr", (512, 512), (256, 256), compressors=ZstdCodec(level=1))
    mount = mount_array(tmp_path / "a.zarr", ["rw"])
    with open(mount.path / "data", "r+b", buffering=0) as flat:
        os.pwrite(flat.fileno(), np.full(400, 4321, np.uint16).tobytes(), (300 * 512 + 10) * 2)  # (chunk 1/0)
        for row in range(256):  # (all of chunk 0/1)
            os.pwrite(flat.fileno(), np.full(256, 17, np.uint16).tobytes(), (row * 512 + 256) * 2)
        data[300, 10:410] = 4321
        data[:256, 256:] = 17
        stored = zarr.open_array(tmp_path / "a.zarr", mode="r")
        assert stored[300, 10] != 4321  # (not stored yet)
        with tifffile.imread(mount.path / "data.tif", aszarr=True) as store:
            assert np.array_equal(zarr.open_array(store, mode="r")[...], data)
    assert np.array_equal(zarr.open_array(tmp_path / "a.zarr", mode="r")[...], data)  # (stored at the close)


def test_a_tile_read_in_parts_shows_a_write_through_data(tmp_path: Path, mount_array: Any) -> None:
    """A decoded tile's first partial request keeps it for the rest (`dd bs=1M`'s requests end
    inside tiles): a write through `data` between two reads of its parts is seen by both."""
    data = image(tmp_path / "a.zarr", (512, 512), (256, 256), compressors=ZstdCodec(level=1))
    mount = mount_array(tmp_path / "a.zarr", ["rw"])
    with tifffile.TiffFile(mount.path / "data.tif") as tiff:
        at = int(tiff.pages[0].dataoffsets[1])  # type: ignore[union-attr]
    size = 256 * 256 * 2

    def tile() -> bytes:
        return data[:256, 256:].astype("<u2").tobytes()

    with open(mount.path / "data.tif", "rb", buffering=0) as tif, \
            open(mount.path / "data", "r+b", buffering=0) as flat:
        assert os.pread(tif.fileno(), 5000, at) == tile()[:5000]
        os.pwrite(flat.fileno(), np.full(256, 17, np.uint16).tobytes(), 256 * 2)  # (row 0 of the tile)
        os.pwrite(flat.fileno(), np.uint16(9).tobytes(), (200 * 512 + 300) * 2)
        os.fsync(flat.fileno())
        data[0, 256:], data[200, 300] = 17, 9
        assert os.pread(tif.fileno(), size - 5000, at + 5000) == tile()[5000:]
        assert os.pread(tif.fileno(), 5000, at) == tile()[:5000]


def test_decoded_tiles_of_a_sharded_blosc_array(tmp_path: Path, mount_array: Any) -> None:
    data = image(tmp_path / "a.zarr", (3, 300, 400), (1, 64, 128), shards=(1, 128, 256),
                 compressors=BloscCodec(cname="zstd"))
    mount = mount_array(tmp_path / "a.zarr", ["ro"])
    info = gdalinfo(mount.path / "data.tif")
    assert len(info["bands"]) == 3 and info["bands"][0]["block"] == [128, 64]
    pixels = tifffile.imread(mount.path / "data.tif")
    assert np.array_equal(pixels, data)
    assert stats(mount.path)["chunks_decoded"] == 3 * 5 * 4  # each inner chunk once
    rewritten = np.full_like(data, 9)  # (another writer; the mount has these chunks decoded)
    zarr.open_array(tmp_path / "a.zarr", mode="r+")[...] = rewritten
    assert np.array_equal(tifffile.imread(mount.path / "data.tif"), rewritten)  # (at the next open)


def test_opencv_reads_deflate_tiles_as_stored(tmp_path: Path, mount_array: Any) -> None:
    """A v2 array of zlib chunks: Adobe Deflate tiles, as stored (OpenCV's libtiff has no zstd)."""
    zlib = numcodecs.Zlib(level=1)
    data = image(tmp_path / "a.zarr", (200, 300), (64, 96), zarr_format=2, compressors=zlib)
    mount = mount_array(tmp_path / "a.zarr", ["ro"])
    assert np.array_equal(cv2.imread(str(mount.path / "data.tif"), cv2.IMREAD_UNCHANGED), data)
    assert "AdobeDeflate" in subprocess.run(["tiffinfo", str(mount.path / "data.tif")], check=True,
                                            capture_output=True, text=True).stdout.replace(" ", "")
    assert stats(mount.path)["chunks_decoded"] == 0


IMAGEJ_READER = """
import ij.ImagePlus;
import ij.io.Opener;

public class Read {
    public static void main(String[] args) {
        ImagePlus image = new Opener().openImage(args[0]);
        System.out.println(image.getWidth() + " " + image.getHeight() + " " + image.getBitDepth() + " "
            + image.getProcessor().getPixel(7, 5) + " " + image.getProcessor().getPixel(89, 59));
    }
}
"""


def test_imagej_opens_strips(tmp_path: Path, mount_array: Any) -> None:
    """ImageJ 1.x (its own TIFF reader, headless) reads strips: chunks whose edges are not
    multiples of 16 (it reads no tiles)."""
    data = image(tmp_path / "a.zarr", (60, 90), (30, 45))
    mount = mount_array(tmp_path / "a.zarr", ["ro"])
    source = tmp_path / "Read.java"
    source.write_text(IMAGEJ_READER)
    command = ["java", "-Djava.awt.headless=true", "-cp", "/usr/share/java/ij.jar", str(source)]
    out = subprocess.run([*command, str(mount.path / "data.tif")], capture_output=True, text=True,
                         timeout=120, check=True)
    assert out.stdout.split() == ["90", "60", "16", str(data[5, 7]), str(data[59, 89])]


def test_rewritten_after_a_write_and_left_out_by_views(tmp_path: Path, mount_array: Any) -> None:
    data = image(tmp_path / "a.zarr", (64, 64), (32, 32), compressors=ZstdCodec())
    mount = mount_array(tmp_path / "a.zarr", ["rw"])
    assert np.array_equal(tifffile.imread(mount.path / "data.tif"), data)
    with open(mount.path / "data", "r+b") as flat:
        flat.seek((40 * 64 + 3) * 2)
        flat.write(np.uint16(54321).tobytes())
    data[40, 3] = 54321
    wait_until(lambda: np.array_equal(tifffile.imread(mount.path / "data.tif"), data), what="the new value")
    plain = mount_array(tmp_path / "a.zarr", ["ro", "views=npy:vrt"])
    assert "data.tif" not in {p.name for p in plain.path.iterdir()}


def test_big_sparse_array_as_bigtiff_in_gdal(tmp_path: Path, mount_array: Any) -> None:
    """A sparse array whose decoded tiles pass 4 GiB: a BigTIFF GDAL reads windows of, past
    the 4 GiB offset, decoding only the chunks of the window."""
    array = zarr.create_array(tmp_path / "a.zarr", shape=(66000, 66000), chunks=(1024, 1024), dtype="uint8",
                              compressors=BloscCodec(), fill_value=7)
    array[65600:65610, 100:110] = 3
    mount = mount_array(tmp_path / "a.zarr", ["ro"])
    tif = mount.path / "data.tif"
    assert tif.stat().st_size > 1 << 32
    window = tmp_path / "window.tif"
    subprocess.run(["gdal_translate", "-q", "-srcwin", "96", "65590", "30", "30", str(tif), str(window)],
                   check=True)
    want = np.full((30, 30), 7, np.uint8)
    want[10:20, 4:14] = 3
    assert np.array_equal(tifffile.imread(window), want)
    assert stats(mount.path)["chunks_decoded"] == 1
    with open(tif, "rb") as f:
        assert f.read(4) == b"II+\0"  # BigTIFF


@pytest.mark.parametrize("version", ["0.4", "0.5"])
def test_ome_zarr_image_as_an_ome_tiff_pyramid(tmp_path: Path, mount_array: Any, version: str) -> None:
    """`data.ome.tif` in an OME-Zarr image's directory (and in no other): tifffile opens the OME
    series with every level, libtiff sees the SubIFDs, a write to a level shows at the next open."""
    from ome_zarr.format import FormatV04, FormatV05
    from ome_zarr.writer import write_image

    group = zarr.open_group(tmp_path / "image.zarr", mode="w", zarr_format=2 if version == "0.4" else 3)
    data = np.random.default_rng(4).integers(0, 4000, (2, 256, 320)).astype("uint16")
    write_image(data, group, axes="cyx", fmt=FormatV04() if version == "0.4" else FormatV05(),
                scale_factors=[2, 4], storage_options={"chunks": (1, 64, 64)})
    levels = sorted(name for name, _ in group.arrays())
    mount = mount_array(tmp_path / "image.zarr", ["rw"])
    tif = mount.path / "data.ome.tif"
    assert tif.name in os.listdir(mount.path) and tif.name not in os.listdir(mount.path / levels[0])
    with tifffile.TiffFile(tif) as tiff:
        series = tiff.series[0]
        assert tiff.is_ome and series.axes == "CYX" and len(series.levels) == 3
        assert np.array_equal(series.asarray(), data)
        smallest = zarr.open_array(tmp_path / "image.zarr" / levels[2], mode="r")[...]
        assert np.array_equal(series.levels[2].asarray(), smallest)
    info = subprocess.run(["tiffinfo", str(tif)], check=True, capture_output=True, text=True).stdout
    assert "SubIFD" in info
    with open(mount.path / levels[0] / "data", "r+b") as flat:
        flat.write(np.uint16(65000).tobytes())
    wait_until(lambda: tifffile.imread(tif, series=0)[0, 0, 0] == 65000, what="the written value")


def test_another_writers_shards_show_at_the_next_open(tmp_path: Path, mount_array: Any) -> None:
    """Close-to-open, as `data`: tiles located in shards another writer rewrote (other sizes,
    other places) are located again, from the shard indexes as stored now."""
    data = image(tmp_path / "a.zarr", (256, 256), (64, 64), shards=(128, 128), compressors=ZstdCodec())
    mount = mount_array(tmp_path / "a.zarr", ["ro", "filters=plugins"])  # (zstd tiles as stored)
    assert np.array_equal(tifffile.imread(mount.path / "data.tif"), data)
    rewritten = np.zeros_like(data)
    rewritten[::3, ::5] = 7  # (compresses far better: every tile moves)
    zarr.open_array(tmp_path / "a.zarr", mode="r+")[...] = rewritten
    assert np.array_equal(tifffile.imread(mount.path / "data.tif"), rewritten)



def cached_bytes(path: Path) -> int:
    """Bytes of the file at `path` in the page cache (fincore; its open is an open of the file)."""
    out = subprocess.run(["fincore", "--json", "--bytes", "--output", "RES", str(path)], check=True,
                         capture_output=True, text=True).stdout
    return int(json.loads(out)["fincore"][0]["res"])


def test_opening_data_tif_again_keeps_the_pages_of_data(tmp_path: Path, mount_array: Any) -> None:
    """Each open of data.tif rechecks the array (close-to-open), and when nothing changed it
    changes nothing: the kernel keeps the pages of `data` it read. What another writer stored
    shows at the next open of either."""
    data = image(tmp_path / "a.zarr", (2048, 2048), (256, 256), compressors=ZstdCodec(level=1))
    mount = mount_array(tmp_path / "a.zarr", ["ro"])
    flat = mount.path / "data"
    assert cached_bytes(flat) == 0
    assert np.array_equal(np.fromfile(flat, "<u2").reshape(data.shape), data)
    assert cached_bytes(flat) > data.nbytes // 2
    for _ in range(3):
        assert np.array_equal(tifffile.imread(mount.path / "data.tif"), data)
    # (An open that let the kernel drop the pages leaves none; this machine's kernel also pages
    # out a few cold ones of its own accord, DAMON's proactive reclaim: 15 of 2,048 seen.)
    assert cached_bytes(flat) > data.nbytes // 2
    data[:256, 256:512] = 9
    zarr.open_array(tmp_path / "a.zarr", mode="r+")[:256, 256:512] = 9
    assert np.array_equal(tifffile.imread(mount.path / "data.tif"), data)
    assert np.array_equal(np.fromfile(flat, "<u2").reshape(data.shape), data)


def test_a_reopened_pyramid_shows_levels_another_writer_grew(tmp_path: Path, mount_array: Any) -> None:
    """Close-to-open, as `data.tif`: a time point another writer appended to every level of an
    OME-Zarr image shows in `data.ome.tif` at its next open, at each level."""
    from ome_zarr.format import FormatV05
    from ome_zarr.writer import write_image

    group = zarr.open_group(tmp_path / "image.zarr", mode="w", zarr_format=3)
    data = np.random.default_rng(5).integers(0, 4000, (2, 128, 160)).astype("uint16")
    write_image(data, group, axes="tyx", fmt=FormatV05(), scale_factors=[2, 4],
                storage_options={"chunks": (1, 64, 64)})
    levels = sorted(name for name, _ in group.arrays())
    mount = mount_array(tmp_path / "image.zarr", ["ro"])
    tif = mount.path / "data.ome.tif"
    with tifffile.TiffFile(tif) as tiff:
        assert [level.shape[0] for level in tiff.series[0].levels] == [2, 2, 2]
    grown = []
    for name in levels:
        level = zarr.open_array(tmp_path / "image.zarr" / name, mode="r+")
        level.resize((3, *level.shape[1:]))
        level[2] = 7 + len(grown)
        grown.append(level[...])
    with tifffile.TiffFile(tif) as tiff:
        found = [level.asarray() for level in tiff.series[0].levels]
    assert [level.shape for level in found] == [level.shape for level in grown]
    for seen, want in zip(found, grown, strict=True):
        assert np.array_equal(seen, want)
