"""Every multiscale group shows `data.tif`, a cloud-optimized GeoTIFF of its levels (issue 38
item 7): an OME-Zarr image (written by ome-zarr-py, 0.4 and 0.5) and a GeoZarr pyramid, read
through real mounts by GDAL's own COG validator, OpenSlide (every level) and tifffile, and
compared with the levels as zarr-python reads them."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import openslide
import pytest
import tifffile

from tests.helpers.geo_sources import gdalinfo
from tests.helpers.pyramids import COG_VALIDATOR, ome_image, pyramid


def assert_cloud_optimized(path: Path) -> None:
    found = subprocess.run(["/usr/bin/python3", COG_VALIDATOR, str(path)], capture_output=True, text=True)
    said = found.stdout + found.stderr
    assert found.returncode == 0 and "is a valid cloud optimized GeoTIFF" in found.stdout, said


@pytest.mark.parametrize("version", ["0.4", "0.5"])
def test_an_ome_zarr_image_as_a_cog_that_openslide_reads_at_every_level(
        tmp_path: Path, mount_array: Any, version: str) -> None:
    levels = ome_image(tmp_path / "image.zarr", version)
    mount = mount_array(tmp_path / "image.zarr", ["ro"])
    tif = mount.path / "data.tif"
    assert {"data.tif", "data.ome.tif"} <= set(os.listdir(mount.path))
    assert_cloud_optimized(tif)
    info = gdalinfo(tif)
    assert info["size"] == [1024, 1536]
    assert [o["size"] for o in info["bands"][0]["overviews"]] == [[512, 768], [256, 384]]
    with tifffile.TiffFile(tif) as tiff:
        assert [page.shape for page in tiff.pages] == [level.shape for level in levels]
        pages = list(tiff.pages)
        assert all(np.array_equal(page.asarray(), level) for page, level in zip(pages, levels, strict=True))
    slide = openslide.OpenSlide(str(tif))
    try:
        assert slide.level_dimensions == tuple((level.shape[1], level.shape[0]) for level in levels)
        for number, level in enumerate(levels):
            scale = 2**number
            region = np.asarray(slide.read_region((32 * scale, 48 * scale), number, (200, 300)))
            assert np.array_equal(region[..., 0], level[48 : 48 + 300, 32 : 32 + 200])
            assert (region[..., 3] == 255).all()  # (opaque: every pixel inside the level)
    finally:
        slide.close()


def test_a_geozarr_pyramid_is_cloud_optimized(tmp_path: Path, mount_array: Any) -> None:
    """The overviews' tiles before the image's, the smallest first, with every IFD before
    them: what GDAL's validator asks; GDAL reads each overview as the level it is."""
    levels = pyramid(tmp_path / "p.zarr", arrays=True)["b"]
    mount = mount_array(tmp_path / "p.zarr", ["ro"])
    tif = mount.path / "data.tif"
    assert_cloud_optimized(tif)
    with tifffile.TiffFile(tif) as tiff:
        pages = list(tiff.pages)
        offsets = [page.dataoffsets[0] for page in pages]  # type: ignore[union-attr]
        assert offsets[2] < offsets[1] < offsets[0]
        assert all(np.array_equal(page.asarray(), level) for page, level in zip(pages, levels, strict=True))


def test_opening_a_pyramid_again_changes_nothing_when_no_level_did(tmp_path: Path, mount_array: Any) -> None:
    """Each open of data.ome.tif or data.tif fetches again the tiles it fetched (close-to-open),
    and when no level changed the file stays as it was: its mtime too (a viewer or a copy
    tool that watches it would take every open for a change)."""
    levels = ome_image(tmp_path / "image.zarr", "0.4")
    mount = mount_array(tmp_path / "image.zarr", ["ro"])
    names = ("data.ome.tif", "data.tif")

    def opened() -> dict[str, int]:
        for name in names:
            with tifffile.TiffFile(mount.path / name) as tiff:
                assert np.array_equal(tiff.pages[0].asarray(), levels[0])
        return {name: os.stat(mount.path / name).st_mtime_ns for name in names}

    first = opened()
    assert [opened() for _ in range(3)] == [first] * 3
