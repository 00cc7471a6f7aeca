"""Header views that know where the data is, through real mounts and the real readers: xarray
datasets (v2 and v3, consolidated) seen by GDAL (gdalinfo -json, gdal_translate to GeoTIFF),
OME-Zarr images seen by SimpleITK and pynrrd; arrays without such metadata keep the headers
the code before placements made, byte for byte."""

from __future__ import annotations

import base64
import json
import subprocess
import warnings
from pathlib import Path
from typing import Any

import nrrd
import numpy as np
import pytest
import SimpleITK as sitk
import tifffile
import xarray as xr
import zarr
from ome_zarr.writer import write_image

from tests.helpers.geo_sources import UTM33, gdalinfo, to_zarr, weather

FORMATS = [pytest.param(2, id="v2"), pytest.param(3, id="v3")]


def geotiff_of(vrt: Path, tmp_path: Path) -> tuple[dict[str, Any], np.ndarray[Any, Any]]:
    tif = tmp_path / f"{vrt.parent.name}.tif"
    subprocess.run(["gdal_translate", "-q", str(vrt), str(tif)], check=True)
    pixels = tifffile.imread(tif)
    return gdalinfo(tif), pixels if pixels.ndim == 2 else np.moveaxis(pixels, -1, 0)


@pytest.mark.fast
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("south_up", [False, True], ids=["north-up", "south-up"])
def test_xarray_grid_in_gdal(tmp_path: Path, mount_array: Any, fmt: int, south_up: bool) -> None:
    ds = weather(south_up)
    mount = mount_array(to_zarr(ds, tmp_path / "weather.zarr", fmt), ["ro"])
    info = gdalinfo(mount.path / "t2m" / "data.vrt")
    lat0 = float(ds.lat[0])
    y_step = 0.5 if south_up else -0.5
    assert info["geoTransform"] == [-10.125, 0.25, 0.0, lat0 - y_step / 2, 0.0, y_step]
    wkt = info["coordinateSystem"]["wkt"]
    assert wkt.startswith('GEOGCRS["WGS 84"') and 'ID["EPSG",4326]' in wkt
    bands = info["bands"]
    times = ["2001-03-01T00:00:00", "2001-03-01T06:00:00", "2001-03-01T12:00:00"]
    assert [b["description"] for b in bands] == times
    assert all(b["noDataValue"] == "NaN" and b["unit"] == b["metadata"][""]["units"] == "K" for b in bands)
    geo, pixels = geotiff_of(mount.path / "t2m" / "data.vrt", tmp_path)
    assert geo["geoTransform"] == info["geoTransform"] and "4326" in geo["coordinateSystem"]["wkt"]
    assert np.array_equal(pixels, ds.t2m.values, equal_nan=True)
    # the centre of a cell in GDAL's terms is the coordinate xarray gives it
    gt = info["geoTransform"]
    assert gt[3] + gt[5] * 2.5 == float(ds.lat[2]) and gt[0] + gt[1] * 3.5 == float(ds.lon[3])
    mask = gdalinfo(mount.path / "mask" / "data.vrt")  # rank 2: one band, no times
    assert mask["geoTransform"] == info["geoTransform"] and "description" not in mask["bands"][0]


@pytest.mark.parametrize("fmt", FORMATS)
def test_packed_variable_unpacks_in_gdal(tmp_path: Path, mount_array: Any, fmt: int) -> None:
    ds = weather()
    store = to_zarr(ds, tmp_path / "weather.zarr", fmt)
    mount = mount_array(store, ["ro"])
    band = gdalinfo(mount.path / "sp" / "data.vrt")["bands"][0]
    assert (band["type"], band["noDataValue"], band["scale"], band["offset"]) == ("Int16", -32768, 0.01, 1025)
    unpacked = tmp_path / "sp.tif"
    subprocess.run(["gdal_translate", "-q", "-unscale", "-ot", "Float64", "-a_nodata", "none",
                    str(mount.path / "sp" / "data.vrt"), str(unpacked)], check=True)
    raw = zarr.open_array(store / "sp", mode="r")[...]
    values = np.moveaxis(tifffile.imread(unpacked), -1, 0)
    decoded = xr.open_zarr(store, zarr_format=fmt).sp.values
    held = raw != -32768
    assert not held[0, 1, 1] and np.allclose(values[held], decoded[held], rtol=0, atol=1e-9)


@pytest.mark.parametrize("fmt", FORMATS)
def test_projected_grid_mapping_and_noleap_times(tmp_path: Path, mount_array: Any, fmt: int) -> None:
    x = 500000.0 + 1000.0 * np.arange(6)
    y = 5000000.0 - 1000.0 * np.arange(4)
    days = np.array([0, 59, 365])  # 2001-03-01 and 2002-01-01 in a 365-day year
    ds = xr.Dataset({"ndvi": (("time", "y", "x"), np.arange(72, dtype="f8").reshape(3, 4, 6) / 72,
                              {"grid_mapping": "crs"}),
                     "crs": ((), 0, {"crs_wkt": UTM33, "grid_mapping_name": "transverse_mercator"})},
                    coords={"x": x, "y": y, "time": ("time", days, {"units": "days since 2001-01-01",
                                                                    "calendar": "noleap"})})
    mount = mount_array(to_zarr(ds, tmp_path / "utm.zarr", fmt), ["ro"])
    info = gdalinfo(mount.path / "ndvi" / "data.vrt")
    assert info["geoTransform"] == [499500.0, 1000.0, 0.0, 5000500.0, 0.0, -1000.0]
    assert 'ID["EPSG",32633]' in info["coordinateSystem"]["wkt"]
    assert [b["description"] for b in info["bands"]] == [
        "2001-01-01T00:00:00", "2001-03-01T00:00:00", "2002-01-01T00:00:00"]
    assert info["bands"][0]["noDataValue"] == "NaN"  # xarray's default _FillValue for floats
    for name in ("data.mhd", "data.raw.nhdr"):  # CF coordinates for ITK too; uneven times count elements
        image = sitk.ReadImage(str(mount.path / "ndvi" / name))
        assert image.GetOrigin() == (500000.0, 5000000.0, 0.0) and image.GetSpacing() == (1000.0, 1000.0, 1.0)
        assert image.GetDirection() == (1.0, 0.0, 0.0, 0.0, -1.0, 0.0, 0.0, 0.0, 1.0)  # y runs south


def test_uneven_coordinates_give_no_transform(tmp_path: Path, mount_array: Any) -> None:
    ds = xr.Dataset({"v": (("lat", "lon"), np.ones((3, 4), "f4"))},
                    coords={"lat": [0.0, 1.0, 3.0], "lon": [0.0, 1.0, 2.0, 3.0]})
    mount = mount_array(to_zarr(ds, tmp_path / "uneven.zarr", 3), ["ro"])
    info = gdalinfo(mount.path / "v" / "data.vrt")
    assert "geoTransform" not in info and "coordinateSystem" not in info


def test_unreadable_coordinates_cost_the_placement_only(tmp_path: Path, mount_array: Any) -> None:
    store = to_zarr(weather(), tmp_path / "weather.zarr", 3)
    (store / "lon" / "c" / "0").write_bytes(b"not zstd")
    mount = mount_array(store, ["ro"])
    info = gdalinfo(mount.path / "t2m" / "data.vrt")
    assert "geoTransform" not in info and len(info["bands"]) == 3
    mount.wait_for_log("its coordinates and placement cannot be read")
    assert np.array_equal(np.fromfile(mount.path / "t2m" / "data", "<f4").reshape(3, 20, 60),
                          zarr.open_array(store / "t2m", mode="r")[...], equal_nan=True)


# -- OME-Zarr for ITK ---------------------------------------------------------------------------


def _itk(path: Path) -> tuple[tuple[float, ...], tuple[float, ...], np.ndarray[Any, Any]]:
    image = sitk.ReadImage(str(path))
    return image.GetOrigin(), image.GetSpacing(), sitk.GetArrayFromImage(image)


def test_ome_zarr_04_translation_becomes_the_origin(tmp_path: Path, mount_array: Any) -> None:
    store = tmp_path / "image.ome.zarr"
    image = (np.arange(8 * 32 * 40) % 251).astype(np.uint8).reshape(8, 32, 40)
    root = zarr.open_group(store, mode="w", zarr_format=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        write_image(image, root, axes="zyx", scale_factors=[2], storage_options={"chunks": (4, 16, 16)})
    datasets = json.loads((store / ".zattrs").read_bytes())["multiscales"][0]["datasets"]
    transforms = {d["path"]: {t["type"]: t[t["type"]] for t in d["coordinateTransformations"]}
                  for d in datasets}
    assert transforms[datasets[1]["path"]] == {"scale": [1.0, 2.0, 2.0], "translation": [0.0, 0.5, 0.5]}
    mount = mount_array(store, ["ro"])
    for dataset in datasets:
        scale, origin = transforms[dataset["path"]]["scale"], transforms[dataset["path"]]["translation"]
        want = zarr.open_array(store / dataset["path"], mode="r")[...]
        for name in ("data.mhd", "data.raw.nhdr"):
            got_origin, got_spacing, values = _itk(mount.path / dataset["path"] / name)
            assert got_origin == tuple(origin[::-1]) and got_spacing == tuple(scale[::-1])
            assert np.array_equal(values, want)
        fields = nrrd.read_header(str(mount.path / dataset["path"] / "data.raw.nhdr"))
        if any(origin):
            assert list(fields["space origin"]) == origin[::-1]
            assert np.array_equal(fields["space directions"], np.diag(scale[::-1]))
        else:  # a zero translation is the readers' default: the header as before
            assert list(fields["spacings"]) == scale[::-1] and "space origin" not in fields


def test_ome_zarr_05_with_a_multiscale_transform(tmp_path: Path, mount_array: Any) -> None:
    store = tmp_path / "image.zarr"
    root = zarr.open_group(store, mode="w", zarr_format=3)
    values = np.arange(6 * 8, dtype="<u2").reshape(6, 8)
    root.create_array("0", shape=values.shape, dtype=values.dtype, chunks=(4, 4))[...] = values
    root.attrs["ome"] = {"version": "0.5", "multiscales": [{
        "axes": [{"name": "y", "type": "space"}, {"name": "x", "type": "space"}],
        "datasets": [{"path": "0", "coordinateTransformations": [
            {"type": "scale", "scale": [2.0, 0.75]}, {"type": "translation", "translation": [1.0, 3.0]}]}],
        "coordinateTransformations": [{"type": "scale", "scale": [10.0, 10.0]}]}]}
    mount = mount_array(store, ["ro", "order=F"])
    for name in ("data.mhd", "data.raw.nhdr"):
        origin, spacing, read = _itk(mount.path / "0" / name)
        assert origin == (10.0, 30.0) and spacing == (20.0, 7.5)  # Fortran order: y is fastest
        assert np.array_equal(read, values.T)


# -- byte for byte without placement ------------------------------------------------------------


# The headers zarrfs wrote before it knew of placements (commit 2c011b7), base64, by order and
# array: arrays without such metadata must still get them byte for byte.
HEADERS_BEFORE = Path(__file__).parents[2] / "data" / "headers_before_placements.json"


@pytest.mark.parametrize("fortran", [False, True], ids=["C", "F"])
def test_arrays_without_placement_keep_their_headers(tmp_path: Path, mount_array: Any, fortran: bool) -> None:
    before = json.loads(HEADERS_BEFORE.read_text())
    store = tmp_path / "plain.zarr"
    root = zarr.open_group(store, mode="w", zarr_format=3)
    arrays = {"a": ((5, 7), "<f4", None), "b": ((2, 3, 4), ">i2", ["t", "y", "x"]), "c": ((9,), "<u1", None),
              "d": ((3, 4, 5, 6), "<f8", None)}
    for name, (shape, dtype, dims) in arrays.items():
        root.create_array(name, shape=shape, dtype=dtype, chunks=shape, dimension_names=dims)
    ome = tmp_path / "scaled.zarr"  # OME-Zarr with scales only: spacings as before
    group = zarr.open_group(ome, mode="w", zarr_format=2)
    group.create_array("0", shape=(4, 6), dtype="<u2", chunks=(4, 4))
    group.attrs["multiscales"] = [{"version": "0.4", "axes": [{"name": "y"}, {"name": "x"}], "datasets": [
        {"path": "0", "coordinateTransformations": [{"type": "scale", "scale": [0.5, 2.0]}]}]}]
    options = ["ro", "order=F"] if fortran else ["ro"]
    mount, scaled = mount_array(store, options), mount_array(ome, options)
    paths = {name: mount.path / name for name in arrays} | {"scaled/0": scaled.path / "0"}
    for name, path in paths.items():
        for file, encoded in before[f"{'F' if fortran else 'C'}:{name}"].items():
            if encoded is None:
                assert not (path / file).exists()
            else:
                header = base64.b64decode(encoded)
                assert (path / file).read_bytes()[: len(header)] == header, (path, file)


def _geozarr_array(path: Path, attributes: dict[str, Any], group_attributes: dict[str, Any]) -> np.ndarray:
    group = zarr.open_group(str(path), mode="w", zarr_format=3, attributes=group_attributes)
    values = np.arange(30 * 40, dtype="<f4").reshape(30, 40)
    array = group.create_array("band", shape=values.shape, chunks=(16, 16), dtype="<f4",
                               dimension_names=["y", "x"], attributes=attributes)
    array[...] = values
    return values


@pytest.mark.parametrize("registration", ["pixel", "node"])
def test_geozarr_spatial_and_proj_conventions(tmp_path: Path, mount_array: Any, registration: str) -> None:
    transform = [10.0, 0.0, 500000.0, 0.0, -10.0, 5000000.0]
    values = _geozarr_array(tmp_path / "g.zarr", {
        "spatial:dimensions": ["y", "x"], "spatial:transform": transform,
        "spatial:registration": registration}, {"proj:code": "EPSG:32633"})
    mount = mount_array(tmp_path / "g.zarr")
    info = gdalinfo(mount.path / "band" / "data.vrt")
    shift = 5.0 if registration == "node" else 0.0  # (node: the transform gives cell centres)
    assert info["geoTransform"] == [500000.0 - shift, 10.0, 0.0, 5000000.0 + shift, 0.0, -10.0]
    assert '"EPSG",32633' in info["coordinateSystem"]["wkt"].replace(" ", "")
    tiff, pixels = geotiff_of(mount.path / "band" / "data.vrt", tmp_path)
    assert tiff["geoTransform"] == info["geoTransform"]
    assert np.array_equal(pixels, values)


def test_geozarr_transform_over_other_axes_is_not_used(tmp_path: Path, mount_array: Any) -> None:
    # spatial:dimensions names the axes in another order than the array's last two (y, x).
    _geozarr_array(tmp_path / "g.zarr", {
        "spatial:dimensions": ["x", "y"], "spatial:transform": [10, 0, 0, 0, -10, 0],
        "proj:wkt2": UTM33}, {})
    mount = mount_array(tmp_path / "g.zarr")
    info = gdalinfo(mount.path / "band" / "data.vrt")
    assert "geoTransform" not in info
