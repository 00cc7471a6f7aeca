"""Placement (zarrfs.views.placement, .ome, .cf_time) and the headers made from it, without FUSE:
the headers are written beside a raw file and opened with the real readers (gdalinfo -json,
SimpleITK, pynrrd)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import nrrd
import numpy as np
import pytest
import SimpleITK as sitk

from zarrfs.views.headers.formats import mhd_header, nrrd_header, vrt_header
from zarrfs.views.placement.cf_time import iso_times
from zarrfs.views.placement.core import NOWHERE, WGS84, Coordinate, Placement, cf_placement, regular_step
from zarrfs.views.placement.ome import ome_placement

pytestmark = pytest.mark.fast

F4 = np.dtype("<f4")

def ome_spacings(group_attributes: dict[str, object], name: str, rank: int) -> list[float] | None:
    """The spacing `ome_placement` finds, one number per axis (None: nothing usable)."""
    found = ome_placement(group_attributes, name, rank)
    return None if found is None or found.spacing is None else list(found.spacing)


def gdalinfo(path: Path) -> dict[str, Any]:
    out = subprocess.run(["gdalinfo", "-json", str(path)], check=True, capture_output=True, text=True)
    return dict(json.loads(out.stdout))


def coordinate(name: str, values: Any, **attributes: Any) -> Coordinate:
    return Coordinate(name, np.asarray(values), attributes)


# -- regular steps ------------------------------------------------------------------------------


def test_regular_steps_within_their_precision() -> None:
    assert regular_step(np.arange(5) * 2 + 1) == (1.0, 2.0)
    assert regular_step(np.linspace(90, -90, 721)) == (90.0, -0.25)
    wide = regular_step(np.arange(-180, 180, 0.1, dtype=np.float64).astype(np.float32))
    assert wide is not None and abs(wide[1] - 0.1) < 1e-6  # float32 rounding is not unevenness
    assert regular_step(np.array([0.0, 1.0, 2.5])) is None
    assert regular_step(np.array([0.0, 1.0, 2.0 + 1e-3])) is None
    assert regular_step(np.array([3.0])) is None  # no step
    assert regular_step(np.array([1.0, 1.0])) is None
    assert regular_step(np.array([0.0, np.nan])) is None
    assert regular_step(np.array(["a", "b"])) is None


# -- CF -----------------------------------------------------------------------------------------


def test_cf_lat_lon_north_up() -> None:
    lat, lon = coordinate("lat", [10.0, 9.0, 8.0]), coordinate("lon", [0.5, 1.5, 2.5, 3.5])
    found = cf_placement({"units": "K"}, F4, [lat, lon])
    assert found.geotransform == (0.0, 1.0, 0.0, 10.5, 0.0, -1.0)
    assert found.crs == WGS84 and found.units == "K" and found.nodata is None
    assert found.spacing == (1.0, 1.0) and found.origin == (10.0, 0.5) and found.flipped == (True, False)


def test_cf_crs_needs_latitude_and_longitude_or_a_grid_mapping() -> None:
    y, x = coordinate("y", [0.0, 1.0]), coordinate("x", [0.0, 1.0])
    assert cf_placement({}, F4, [y, x]).crs is None
    named = [coordinate("y", [0.0, 1.0], standard_name="latitude"),
             coordinate("x", [0.0, 1.0], units="degrees_east")]
    assert cf_placement({}, F4, named).crs == WGS84
    assert cf_placement({}, F4, [y, x], grid_mapping={"spatial_ref": "PROJCS[...]"}).crs == "PROJCS[...]"
    assert cf_placement({}, F4, [y, None], grid_mapping={"crs_wkt": "X"}).crs is None  # no transform, no CRS


def test_cf_uneven_or_missing_coordinates_give_no_transform() -> None:
    uneven = cf_placement({}, F4, [coordinate("lat", [0.0, 1.0, 3.0]), coordinate("lon", [0.0, 1.0])])
    assert uneven.geotransform is None and uneven.crs is None
    assert uneven.spacing == (1.0, 1.0) and uneven.origin == (0.0, 0.0)  # lon alone, lat in index space
    assert cf_placement({}, F4, [None, None]) == Placement()


def test_cf_values_packing_and_fill() -> None:
    packed = cf_placement({"scale_factor": 0.01, "add_offset": 273.15, "_FillValue": -32768}, np.dtype("<i2"),
                          [None, None])
    assert (packed.scale, packed.offset, packed.nodata) == (0.01, 273.15, -32768.0)
    base64_nan = cf_placement({"_FillValue": "AAAAAAAA+H8="}, F4, [None, None]).nodata
    assert base64_nan is not None and np.isnan(base64_nan)  # xarray's v3 encoding
    assert cf_placement({"missing_value": [-9999]}, F4, [None, None]).nodata == -9999.0
    assert cf_placement({}, F4, [None, None], stored_fill=-1).nodata == -1.0
    assert cf_placement({"_FillValue": True}, F4, [None, None]).nodata is None


def test_cf_band_names_from_times_and_levels() -> None:
    time = coordinate("time", [0, 6, 12], units="hours since 2000-01-01 00:00:00",
                      calendar="proleptic_gregorian")
    lat, lon = coordinate("lat", [1.0, 2.0]), coordinate("lon", [1.0, 2.0])
    names = cf_placement({}, F4, [time, lat, lon]).band_names
    assert names == ("2000-01-01T00:00:00", "2000-01-01T06:00:00", "2000-01-01T12:00:00")
    level = coordinate("level", [1000, 850, 500.5], units="hPa")
    assert cf_placement({}, F4, [level, lat, lon]).band_names == ("1000 hPa", "850 hPa", "500.5 hPa")
    stamps = coordinate("time", np.array(["2001-02-03", "2001-02-04"], dtype="datetime64[ns]"))
    named_days = cf_placement({}, F4, [stamps, lat, lon]).band_names
    assert named_days == ("2001-02-03T00:00:00", "2001-02-04T00:00:00")


def test_cf_times_in_their_calendars() -> None:
    assert iso_times([0, 1.5], "days since 1970-01-01", None) == [
        "1970-01-01T00:00:00", "1970-01-02T12:00:00"]
    assert iso_times([59], "days since 2001-1-1 00:00", "noleap") == ["2001-03-01T00:00:00"]
    assert iso_times([365], "days since 2000-01-01", "noleap") == ["2001-01-01T00:00:00"]
    assert iso_times([59], "days since 2000-01-01", "standard") == ["2000-02-29T00:00:00"]
    assert iso_times([59], "days since 2000-01-01", "all_leap") == ["2000-02-29T00:00:00"]
    assert iso_times([59], "days since 2000-01-01", "360_day") == ["2000-02-30T00:00:00"]
    assert iso_times([-1], "hours since 2000-01-01T00:00:00Z", "gregorian") == ["1999-12-31T23:00:00"]
    assert iso_times([1], "days since 2000-01-01", "martian") is None  # not a calendar CF knows
    assert iso_times([1], "furlongs since 2000-01-01", None) is None
    assert iso_times([1], "days since 2000-01-01 +05:00", None) is None  # time zones are not guessed


# -- OME-Zarr -----------------------------------------------------------------------------------


def test_ome_scale_translation_and_multiscale_transform() -> None:
    v04 = {"multiscales": [{"datasets": [
        {"path": "0", "coordinateTransformations": [{"type": "scale", "scale": [1.0, 0.5]},
                                                    {"type": "translation", "translation": [10.0, -2.0]}]},
        {"path": "1", "coordinateTransformations": [{"type": "scale", "scale": [2.0, 1.0]}]}],
        "coordinateTransformations": [{"type": "scale", "scale": [3.0, 2.0]}]}]}
    assert ome_placement(v04, "0", 2) == Placement(spacing=(3.0, 1.0), origin=(30.0, -4.0))
    assert ome_placement({"ome": v04}, "1", 2) == Placement(spacing=(6.0, 2.0))  # no translation anywhere
    assert ome_spacings(v04, "1", 2) == [6.0, 2.0]
    del v04["multiscales"][0]["coordinateTransformations"]
    assert ome_placement(v04, "1", 2) == Placement(spacing=(2.0, 1.0))  # no translation: no origin
    bad = {"multiscales": [{"datasets": [{"path": "0", "coordinateTransformations": [
        {"type": "scale", "scale": [1.0, 1.0]}, {"type": "translation", "translation": [1.0]}]}]}]}
    assert ome_placement(bad, "0", 2) is None


# -- headers read by the real readers -----------------------------------------------------------


def test_vrt_geo_fields_read_by_gdal(tmp_path: Path) -> None:
    values = np.arange(2 * 3 * 4, dtype="<i2").reshape(2, 3, 4)
    (tmp_path / "data").write_bytes(values.tobytes())
    placement = Placement(geotransform=(100.0, 10.0, 0.0, 50.0, 0.0, 10.0), crs=WGS84, nodata=-1.0, scale=0.5,
                          offset=3.0, band_names=("2000-01-01T00:00:00", "a <b> & c"), units="m/s")
    header = vrt_header(values.dtype, values.shape, False, placement=placement)
    assert header is not None
    (tmp_path / "data.vrt").write_bytes(header)
    info = gdalinfo(tmp_path / "data.vrt")
    assert info["geoTransform"] == [100.0, 10.0, 0.0, 50.0, 0.0, 10.0]
    assert "4326" in info["coordinateSystem"]["wkt"]
    bands = info["bands"]
    assert [b["description"] for b in bands] == ["2000-01-01T00:00:00", "a <b> & c"]
    assert all(b["noDataValue"] == -1 and b["scale"] == 0.5 and b["offset"] == 3 for b in bands)
    assert all(b["unit"] == "m/s" and b["metadata"][""]["units"] == "m/s" for b in bands)


def test_vrt_band_names_of_another_length_are_left_out() -> None:
    header = vrt_header(F4, (2, 3, 4), False, placement=Placement(band_names=("only one",)))
    assert header is not None and b"Description" not in header


@pytest.mark.parametrize("fortran", [False, True], ids=["C", "F"])
def test_itk_origin_spacing_and_flips(tmp_path: Path, fortran: bool) -> None:
    values = np.arange(2 * 3 * 4, dtype="<u2").reshape(2, 3, 4)
    (tmp_path / "data").write_bytes(values.tobytes(order="F" if fortran else "C"))
    placement = Placement(spacing=(2.0, 0.5, 0.25), origin=(7.0, -1.0, 3.5), flipped=(False, True, False))
    for name, make in (("data.mhd", mhd_header), ("data.raw.nhdr", nrrd_header)):
        header = make(values.dtype, values.shape, fortran, placement=placement)
        assert header is not None
        (tmp_path / name).write_bytes(header)
        image = sitk.ReadImage(str(tmp_path / name))
        order = slice(None) if fortran else slice(None, None, -1)
        assert list(image.GetOrigin()) == [7.0, -1.0, 3.5][order]
        assert list(image.GetSpacing()) == [2.0, 0.5, 0.25][order]
        diagonal = np.diag(np.array(image.GetDirection()).reshape(3, 3))
        assert list(diagonal) == [1.0, -1.0, 1.0][order]
        read = sitk.GetArrayFromImage(image)
        assert np.array_equal(read, values.T if fortran else values)
    fields = nrrd.read_header(str(tmp_path / "data.raw.nhdr"))
    assert fields["space dimension"] == 3 and "spacings" not in fields
    assert list(fields["space origin"]) == [7.0, -1.0, 3.5][order]


@pytest.mark.parametrize("make", [mhd_header, nrrd_header, vrt_header])
def test_no_placement_is_the_old_header(make: Any) -> None:
    assert make(F4, (3, 4), False) == make(F4, (3, 4), False, placement=NOWHERE)


def test_julian_times_count_every_fourth_year_as_leap() -> None:
    from zarrfs.views.placement.cf_time import iso_times

    # 1900 is a leap year in the Julian calendar, not in the Gregorian.
    assert iso_times([0, 58, 59, 60, 366.5], "days since 1900-01-01", "julian") == [
        "1900-01-01T00:00:00", "1900-02-28T00:00:00", "1900-02-29T00:00:00", "1900-03-01T00:00:00",
        "1901-01-01T12:00:00"]
    assert iso_times([59], "days since 1900-01-01", "standard") == ["1900-03-01T00:00:00"]
    assert iso_times([1], "hours since 2000-12-31 23:00", "julian") == ["2001-01-01T00:00:00"]
