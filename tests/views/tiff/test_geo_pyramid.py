"""GeoZarr multiscale groups (zarr-conventions `multiscales` v1) as GeoTIFFs with overviews,
read by GDAL (`gdalinfo`, `gdal_translate -ovr`), libtiff and tifffile through real mounts,
against the levels as zarr-python reads them."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tifffile
import xarray as xr
import zarr

from tests.helpers.geo_sources import gdalinfo
from tests.helpers.mounting import wait_until
from tests.helpers.pyramids import downsampled, overview, pyramid
from zarrfs.views.placement.core import NOWHERE, Placement
from zarrfs.views.tiff.geo_pyramid import Level, geo_multiscale_of, level_placement


def test_level_groups_make_a_geotiff_per_variable(tmp_path: Path, mount_array: Any) -> None:
    levels = pyramid(tmp_path / "p.zarr")
    mount = mount_array(tmp_path / "p.zarr", ["rw"])
    names = os.listdir(mount.path)
    assert {"b.tif", "rgb.tif", "tb.tif"} <= set(names) and "data.tif" not in names
    info = gdalinfo(mount.path / "b.tif")
    assert info["size"] == [768, 1024]
    assert info["geoTransform"] == [500000.0, 10.0, 0.0, 5000000.0, 0.0, -10.0]
    assert 'ID["EPSG",32632]' in info["coordinateSystem"]["wkt"]
    assert [o["size"] for o in info["bands"][0]["overviews"]] == [[384, 512], [192, 256]]
    for number in (0, 1):
        assert np.array_equal(overview(tmp_path, str(mount.path / "b.tif"), number), levels["b"][number + 1])
        planes = overview(tmp_path, str(mount.path / "rgb.tif"), number)
        assert np.array_equal(planes.reshape(levels["rgb"][number + 1].shape), levels["rgb"][number + 1])
    with tifffile.TiffFile(mount.path / "b.tif") as tiff:  # (main chain: the image, then its overviews)
        assert [page.shape for page in tiff.pages] == [(1024, 768), (512, 384), (256, 192)]
        assert np.array_equal(tiff.pages[0].asarray(), levels["b"][0])
    page = f"GTIFF_DIR:2:{mount.path / 'tb.tif'}"  # (pages of rank 4: overviews as their SubIFDs)
    assert [o["size"] for o in gdalinfo(Path(page))["bands"][1]["overviews"]] == [[384, 512], [192, 256]]
    assert np.array_equal(overview(tmp_path, page, 1), levels["tb"][2][1])
    with open(mount.path / "1" / "b" / "data", "r+b") as flat:
        flat.write(np.uint16(65000).tobytes())
    wait_until(lambda: overview(tmp_path, str(mount.path / "b.tif"), 0)[0, 0] == 65000,
               what="the written value")


def test_level_arrays_in_any_order_make_data_tif(tmp_path: Path, mount_array: Any) -> None:
    levels = pyramid(tmp_path / "p.zarr", arrays=True, order=(2, 0, 1))
    mount = mount_array(tmp_path / "p.zarr", ["ro", "filters=plugins"])  # (zstd tiles as stored)
    info = gdalinfo(mount.path / "data.tif")
    assert info["size"] == [768, 1024] and info["geoTransform"][1] == 10.0
    assert [o["size"] for o in info["bands"][0]["overviews"]] == [[384, 512], [192, 256]]
    assert np.array_equal(overview(tmp_path, str(mount.path / "data.tif"), 1), levels["b"][2])
    assert "ZSTD" in subprocess.run(["tiffinfo", str(mount.path / "data.tif")], check=True,
                                    capture_output=True, text=True).stdout
    without = mount_array(tmp_path / "p.zarr", ["ro", "views=npy"])
    assert "data.tif" not in os.listdir(without.path)
    (tmp_path / "p.zarr" / "1" / "zarr.json").write_text("{not json")  # (a level that cannot be opened)
    broken = mount_array(tmp_path / "p.zarr", ["ro"])
    info = gdalinfo(broken.path / "data.tif")
    assert info["size"] == [768, 1024] and [o["size"] for o in info["bands"][0]["overviews"]] == [[192, 256]]


def test_an_xarray_pyramid_as_ndpyramid_writes_it(tmp_path: Path, mount_array: Any) -> None:
    """ndpyramid's layout: `multiscales` a list of `datasets` (level paths, each with its CRS),
    the coarsest first; each level an xarray dataset placed by its x/y coordinates (CF)."""
    full = np.random.default_rng(8).random((256, 512)).astype("float32")
    levels = {}
    for n in range(3):
        factor = 2 ** (2 - n)
        data = downsampled(full, factor) if factor > 1 else full
        cell = 100.0 * factor
        x = -20037508.0 + cell * (np.arange(data.shape[1]) + 0.5)
        y = 10000000.0 - cell * (np.arange(data.shape[0]) + 0.5)
        xr.Dataset({"tas": (("y", "x"), data)}, coords={"x": x, "y": y}).to_zarr(
            tmp_path / "p.zarr", group=str(n), zarr_format=3, consolidated=False, mode="w")
        levels[n] = data
    zarr.open_group(tmp_path / "p.zarr", mode="r+").attrs["multiscales"] = [
        {"datasets": [{"path": str(n), "level": n, "crs": "EPSG:3857"} for n in range(3)], "type": "reduce",
         "metadata": {"method": "pyramid_coarsen"}}]
    mount = mount_array(tmp_path / "p.zarr", ["ro"])
    assert [name for name in os.listdir(mount.path) if name.endswith(".tif")] == ["tas.tif"]
    info = gdalinfo(mount.path / "tas.tif")
    assert info["size"] == [512, 256] and info["geoTransform"] == [-20037508.0, 100.0, 0.0, 1e7, 0.0, -100.0]
    assert 'ID["EPSG",3857]' in info["coordinateSystem"]["wkt"]
    assert [o["size"] for o in info["bands"][0]["overviews"]] == [[256, 128], [128, 64]]
    assert np.array_equal(overview(tmp_path, str(mount.path / "tas.tif"), 1), levels[0])


@pytest.mark.fast
def test_the_layout_is_read_as_the_convention_says() -> None:
    entry = {"asset": "r10m", "spatial:transform": [10.0, 0, 5e5, 0, -10.0, 5e6]}
    assert geo_multiscale_of({"multiscales": {"layout": [entry]}}) == (Level("r10m", entry),)
    for bad in ("../x", "/r10m", "a//b", "", 7):
        assert geo_multiscale_of({"multiscales": {"layout": [{"asset": bad}]}}) is None, bad
    assert geo_multiscale_of({"multiscales": {"layout": [{"asset": "0"}, {"asset": "0"}]}}) is None
    ome = [{"axes": [{"name": "y"}, {"name": "x"}], "datasets": [{"path": "0"}]}]
    assert geo_multiscale_of({"multiscales": ome}) is None  # (an OME-Zarr image's: data.ome.tif)
    xarray = [{"datasets": [{"path": "0", "crs": "EPSG:3857"}, {"path": "1"}]}]
    assert geo_multiscale_of({"multiscales": xarray}) == (
        Level("0", {"asset": "0", "proj:code": "EPSG:3857"}), Level("1", {"asset": "1"}))


@pytest.mark.fast
@pytest.mark.parametrize(("own", "first", "want"), [
    (True, False, (5e5, 20.0, 0.0, 5e6, 0.0, -20.0)),  # the level's own transform
    (False, True, (1.0, 2.0, 0.0, 3.0, 0.0, -2.0)),  # the group's, which is of the first level
    (False, False, None)])  # neither: no transform, but the group's CRS
def test_a_level_is_placed_by_its_entry_or_the_group(own: bool, first: bool, want: Any) -> None:
    entry = {"asset": "1", "spatial:transform": [20.0, 0, 5e5, 0, -20.0, 5e6]} if own else {"asset": "1"}
    group = {"proj:code": "EPSG:32632", "spatial:transform": [2.0, 0, 1.0, 0, -2.0, 3.0]}
    placed = level_placement(NOWHERE, Level("1", entry), first, group, ["y", "x"])
    assert placed.geotransform == want and placed.crs == "EPSG:32632"
    stated = Placement(geotransform=(0.0, 1.0, 0.0, 0.0, 0.0, -1.0), crs="EPSG:4326")
    assert level_placement(stated, Level("1", entry), first, group, ["y", "x"]) is stated


def test_a_reopened_geotiff_shows_levels_another_writer_grew(tmp_path: Path, mount_array: Any) -> None:
    """Close-to-open, as `data.tif`: a time step another writer appended to every level of a
    variable shows in its GeoTIFF at the next open (one page more, at each level)."""
    pyramid(tmp_path / "p.zarr")
    mount = mount_array(tmp_path / "p.zarr", ["ro"])
    tif = mount.path / "tb.tif"
    with tifffile.TiffFile(tif) as tiff:
        assert len(tiff.pages) == 2  # (a page a time step, its channels as samples)
    grown = []
    for n in range(3):
        level = zarr.open_array(tmp_path / "p.zarr" / str(n) / "tb", mode="r+")
        level.resize((3, *level.shape[1:]))
        level[2] = 9 + n
        grown.append(level[...])
    with tifffile.TiffFile(tif) as tiff:
        assert len(tiff.pages) == 3
        assert np.array_equal(tiff.pages[2].asarray(), grown[0][2])
    page = f"GTIFF_DIR:3:{tif}"
    assert np.array_equal(overview(tmp_path, page, 1), grown[2][2])
