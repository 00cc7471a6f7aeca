"""`data.tif` for every TIFF reader (issue 82): arrays and groups written with zarr-python 3's
defaults (v3: zstd; sharded; v2: zstd, and blosc, zarr-python 2's default), an OME-Zarr image's
`data.ome.tif` and a GeoZarr pyramid's cloud-optimized `data.tif`, read through real mounts by
OpenCV (its libtiff has no zstd), tifffile without imagecodecs (no zstd either), Pillow and
GDAL, each compared with what zarr-python reads. A default mount (`filters=builtin`) serves
those tiles decoded; with `-o filters=plugins` they go out as stored, and tifffile with
imagecodecs reads the zstd tiles themselves. Locally and on S3 (moto)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
import tifffile
import zarr

from tests.helpers.mounting import mount_stats as stats
from tests.helpers.pyramids import overview
from tests.helpers.tiff_readers import (
    ARRAYS,
    CHUNKS,
    READERS,
    SHAPE,
    TIFFFILE_WITHOUT_IMAGECODECS,
    Mounted,
    image_values,
    mount_all,
    read_opencv,
    read_pillow,
    read_tifffile_without_imagecodecs,
    written,
)

__all__ = ["written"]  # (the fixture, used by name)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
pytest_plugins = ["tests.helpers.recheck_places"]  # (the fixtures `where` and `s3_server`)

TILE_BYTES = CHUNKS[0] * CHUNKS[1] * 2


@pytest.fixture(scope="module")
def default_mount(written: Path) -> Iterator[Mounted]:
    yield from mount_all(written, ["ro", "filters=builtin"])


@pytest.fixture(scope="module")
def plugins_mount(written: Path) -> Iterator[Mounted]:
    yield from mount_all(written, ["ro", "filters=plugins"])


# -- a default mount ----------------------------------------------------------------------------

@pytest.mark.parametrize("reader", list(READERS))
@pytest.mark.parametrize("name", list(ARRAYS))
def test_every_reader_opens_default_arrays(default_mount: Mounted, tmp_path: Path, name: str,
                                           reader: str) -> None:
    found = READERS[reader](default_mount.mounts[name] / "data.tif", tmp_path)
    assert np.array_equal(found, default_mount.values(name))


@pytest.mark.parametrize("reader", list(READERS))
def test_every_reader_opens_an_ome_zarr_images_ome_tiff(default_mount: Mounted, tmp_path: Path,
                                                        reader: str) -> None:
    """The first plane of `data.ome.tif` (the first channel at full resolution: every reader
    opens its first image)."""
    found = READERS[reader](default_mount.mounts["image"] / "data.ome.tif", tmp_path)
    assert np.array_equal(found, default_mount.image_level(0)[0])


@pytest.mark.parametrize("reader", list(READERS))
def test_every_reader_opens_a_geozarr_pyramids_cog(default_mount: Mounted, tmp_path: Path,
                                                   reader: str) -> None:
    found = READERS[reader](default_mount.mounts["geo"] / "data.tif", tmp_path)
    assert np.array_equal(found, default_mount.values("geo", "0"))


def test_the_cogs_overviews_are_decoded_too(default_mount: Mounted, tmp_path: Path) -> None:
    """Its reduced images, the OME-TIFF's too: tifffile without imagecodecs and GDAL read them."""
    cog = default_mount.mounts["geo"] / "data.tif"
    first_overview = read_tifffile_without_imagecodecs(cog, tmp_path, 1)
    assert np.array_equal(first_overview, default_mount.values("geo", "1"))
    assert np.array_equal(overview(tmp_path, str(cog), 1), default_mount.values("geo", "2"))
    with tifffile.TiffFile(default_mount.mounts["image"] / "data.ome.tif") as tiff:
        levels = tiff.series[0].levels
        assert {page.compression for level in levels for page in level.pages} == {1}  # type: ignore[union-attr]
        assert np.array_equal(levels[1].asarray(), default_mount.image_level(1))


@pytest.mark.fast
def test_decoded_tiles_have_exact_counts_and_are_decoded_as_they_are_read(written: Path,
                                                                          mount_array: Any) -> None:
    """Uncompressed tiles, every byte count the tile's size, each in a slot of its own (as long
    as the tile: 128 KiB, a power of two). A reader of whole tiles (a request a tile, as GDAL's
    and tifffile's) has each stored chunk decoded as it reads it, and nothing kept in the
    cache (its memory goes to the next tile); a reader of tiles in pieces has each decoded
    once, at its first piece, and kept (outside the cache) for the rest of the open; each open
    decodes them again (close-to-open)."""
    mount = mount_array(written / "v3_default.zarr", ["ro"])
    want = np.asarray(zarr.open_array(written / "v3_default.zarr", mode="r")[...])
    tif = mount.path / "data.tif"
    with tifffile.TiffFile(tif) as tiff:
        page = tiff.pages[0]
        assert page.compression == 1  # type: ignore[union-attr]
        assert set(page.databytecounts) == {TILE_BYTES}  # type: ignore[union-attr]
        assert set(np.diff(page.dataoffsets)) == {TILE_BYTES}  # type: ignore[union-attr]
        tiles = list(page.dataoffsets)  # type: ignore[union-attr]

    def read_whole_tiles() -> None:
        with open(tif, "rb", buffering=0) as f:
            found = [np.frombuffer(os.pread(f.fileno(), TILE_BYTES, at), "<u2").reshape(CHUNKS)
                     for at in tiles]
        rows = [np.concatenate(found[i : i + 4], axis=1) for i in range(0, len(found), 4)]
        assert np.array_equal(np.concatenate(rows)[: want.shape[0], : want.shape[1]], want)

    stored = 3 * 4 - 1  # (3 x 4 chunks; one of fill values is not stored)
    for _ in range(2):
        read_whole_tiles()
    assert stats(mount.path)["chunks_decoded"] == 2 * stored
    assert stats(mount.path)["cache_bytes"] == 0
    with open(tif, "rb", buffering=0) as f:  # (in 4 KiB pieces, twice)
        pieces = [b"".join(os.pread(f.fileno(), 4096, at + inside) for at in tiles
                           for inside in range(0, TILE_BYTES, 4096)) for _ in range(2)]
    assert pieces[0] == pieces[1]
    assert stats(mount.path)["chunks_decoded"] == 3 * stored
    assert stats(mount.path)["cache_bytes"] == 0
    read_whole_tiles()
    assert np.array_equal(tifffile.imread(tif), want)
    assert stats(mount.path)["chunks_decoded"] == 5 * stored


# -- filters=plugins --------------------------------------------------------------------------

def test_plugins_pass_zstd_tiles_through_for_tifffile_with_imagecodecs(plugins_mount: Mounted) -> None:
    """The tiles are the chunks as stored (TIFF's zstd, 50000), read by tifffile with imagecodecs;
    the mount decodes nothing; the OME-TIFF's and the COG's tiles go out as stored too."""
    mount = plugins_mount.mounts["v3_default"]
    with tifffile.TiffFile(mount / "data.tif") as tiff:
        page = tiff.pages[0]
        assert page.compression == 50000  # type: ignore[union-attr]
        assert np.array_equal(page.asarray(), plugins_mount.values("v3_default"))  # type: ignore[union-attr]
        offset, count = page.dataoffsets[1], page.databytecounts[1]  # type: ignore[union-attr]
    with open(mount / "data.tif", "rb") as f:
        f.seek(offset)
        assert f.read(count) == (plugins_mount.root / "v3_default.zarr" / "c" / "0" / "1").read_bytes()
    assert stats(mount)["chunks_decoded"] == 0
    for name, file in (("image", "data.ome.tif"), ("geo", "data.tif")):
        with tifffile.TiffFile(plugins_mount.mounts[name] / file) as tiff:
            assert {page.compression for page in tiff.pages} == {50000}  # type: ignore[union-attr]


def test_plugins_zstd_tiles_are_what_readers_without_zstd_cannot_read(plugins_mount: Mounted,
                                                                     tmp_path: Path) -> None:
    """Why the default decodes them: OpenCV and tifffile without imagecodecs fail on them."""
    tif = plugins_mount.mounts["v3_default"] / "data.tif"
    assert cv2.imread(str(tif), cv2.IMREAD_UNCHANGED) is None
    out = tmp_path / "tifffile.npy"
    found = subprocess.run([sys.executable, "-c", TIFFFILE_WITHOUT_IMAGECODECS, str(tif), str(out), "0"],
                           capture_output=True, text=True, timeout=120)
    assert found.returncode != 0 and not out.exists()


# -- locally and on S3 -------------------------------------------------------------------------

def test_a_default_array_on_s3_opens_in_readers_without_zstd(
        where: tuple[str, dict[str, Any], list[str]], tmp_path: Path, mount_array: Any) -> None:
    url, reach, options = where
    data = image_values()
    array = zarr.create_array(url, shape=SHAPE, dtype="uint16", chunks=CHUNKS, fill_value=0, **reach)
    array[...] = data
    mount = mount_array(url, ["ro", *options])
    tif = mount.path / "data.tif"
    for reader in (read_opencv, read_tifffile_without_imagecodecs, read_pillow):
        assert np.array_equal(reader(tif, tmp_path), data), reader.__name__
    assert os.stat(tif).st_size > data.nbytes
