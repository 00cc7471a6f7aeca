"""XRADIO's sky images (xradio.image) as data.fits: a sky cube xradio writes to Zarr, mounted,
its data.fits's world coordinates (astropy.wcs) against xradio's own FITS export of the same
image (`write_image(..., out_format="fits")`, as CASA's exportfits writes them) and against the
image's own sky coordinates; its values against the image's; fitsverify and fitsio read it."""

from __future__ import annotations

import subprocess
import warnings
from pathlib import Path
from typing import Any

import fitsio
import numpy as np
import pytest
import xarray as xr
from astropy.io import fits
from astropy.wcs import WCS

from tests.helpers.mounting import MountFactory

image = pytest.importorskip("xradio.image")

DIMS = ("time", "frequency", "polarization", "l", "m")
SHAPE = (1, 3, 4, 30, 20)
FREQUENCIES = [1.4e9, 1.41e9, 1.42e9]


def _sky(frame: str, polarizations: list[str]) -> xr.Dataset:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        xds = image.make_empty_sky_image([1.0, 0.5], SHAPE[3:], [-1e-5, 1e-5], FREQUENCIES, polarizations,
                                         [59000.5], direction_reference=frame, do_sky_coords=True)
    values = np.random.default_rng(5).standard_normal(SHAPE).astype("float32")
    xds["SKY"] = (DIMS, values, {"units": "Jy/beam", "type": "sky", "object_name": "M31"})
    xds.attrs["data_groups"] = {"base": {"sky": "SKY"}}
    return xds


def _written(xds: xr.Dataset, path: Path, out_format: str) -> Path:
    (name,) = image.write_image(xds, str(path), out_format=out_format)
    return path.parent / Path(name).name


def _wcs(header: fits.Header) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (astropy's notes on the defaults it fills in)
        return WCS(header)


def _pixels() -> tuple[np.ndarray, ...]:
    """(l, m, polarization, frequency) of every pixel, 0-based."""
    return tuple(g.ravel() for g in np.meshgrid(*(np.arange(n) for n in (30, 20, 4, 3)), indexing="ij"))


def _mounted_fits(xds: xr.Dataset, tmp_path: Path,
                  mount_array: MountFactory) -> tuple[fits.Header, np.ndarray]:
    store = _written(xds, tmp_path / "sky.zarr", "zarr")
    mount = mount_array(store, ["ro"])
    file = mount.path / "SKY" / "data.fits"
    verified = subprocess.run(["fitsverify", "-q", str(file)], capture_output=True, text=True, timeout=60)
    assert verified.returncode == 0 and verified.stdout.startswith("verification OK"), verified.stdout
    assert np.array_equal(fitsio.read(str(file)), xds["SKY"].values)
    with fits.open(file, memmap=False) as hdus:
        return hdus[0].header, hdus[0].data


@pytest.mark.parametrize("turned", [False, True], ids=["plain", "rotated, with projection parameters"])
def test_a_cube_is_placed_as_xradios_fits_export_places_it(tmp_path: Path, mount_array: MountFactory,
                                                            turned: bool) -> None:
    xds = _sky("fk5", ["I", "Q", "U", "V"])
    if turned:  # (the image's sky coordinates, made unturned, are left unchecked)
        cos, sin = np.cos(np.radians(20.0)), np.sin(np.radians(20.0))
        xds.attrs["coordinate_system_info"].update(
            pixel_coordinate_transformation_matrix=[[cos, -sin], [sin, cos]],
            projection_parameters=[0.001, -0.002])
    ours, data = _mounted_fits(xds, tmp_path, mount_array)
    with fits.open(_written(xds, tmp_path / "sky.fits", "fits"), memmap=False) as hdus:
        theirs, their_data = hdus[0].header, hdus[0].data
    assert np.array_equal(data, xds["SKY"].values)
    assert np.array_equal(their_data, xds["SKY"].values[0].transpose(0, 1, 3, 2))  # (theirs: l fastest)
    assert [ours[f"CTYPE{i}"] for i in range(1, 6)] == ["DEC--SIN", "RA---SIN", "STOKES", "FREQ", "TIME"]
    for keyword in ("RADESYS", "EQUINOX", "LONPOLE", "LATPOLE", "SPECSYS", "RESTFRQ", "MJD-OBS", "BUNIT"):
        assert ours[keyword] == theirs[keyword], keyword
    east, north, polarization, channel = _pixels()
    dec, ra, stokes, frequency, mjd = _wcs(ours).pixel_to_world_values(
        north, east, polarization, channel, np.zeros_like(east))
    their_ra, their_dec, their_stokes, their_frequency = _wcs(theirs).pixel_to_world_values(
        east, north, polarization, channel)
    assert np.allclose(ra, their_ra, rtol=0, atol=1e-10) and np.allclose(dec, their_dec, rtol=0, atol=1e-10)
    assert np.array_equal(stokes, their_stokes) and np.allclose(frequency, their_frequency, rtol=1e-15)
    assert np.allclose(mjd, 59000.5)
    if turned:
        assert (ours["PC2_1"], ours["PV1_2"]) == (theirs["PC1_2"], theirs["PV2_2"])  # (ours: m before l)
        return
    assert np.allclose(np.radians(ra), xds["right_ascension"].values[east, north], rtol=0, atol=1e-12)
    assert np.allclose(np.radians(dec), xds["declination"].values[east, north], rtol=0, atol=1e-12)


def test_galactic_and_correlations_whose_codes_are_not_a_line(tmp_path: Path,
                                                              mount_array: MountFactory) -> None:
    """GLON/GLAT from the image's own galactic coordinates (xradio's FITS export takes equatorial
    frames alone); RR RL LR LL (FITS codes -1 -3 -4 -2) leave the polarization axis without
    STOKES, its planes counted from 0, where xradio's export would reorder the planes."""
    xds = _sky("galactic", ["RR", "RL", "LR", "LL"])
    ours, data = _mounted_fits(xds, tmp_path, mount_array)
    assert np.array_equal(data, xds["SKY"].values)
    assert (ours["CTYPE1"], ours["CTYPE2"], ours["CTYPE4"]) == ("GLAT-SIN", "GLON-SIN", "FREQ")
    assert (ours["CTYPE3"], ours["CNAME3"], ours["CRVAL3"]) == ("LINEAR", "polarization", 0.0)
    assert "RADESYS" not in ours
    east, north, polarization, channel = _pixels()
    glat, glon, _, frequency, _ = _wcs(ours).pixel_to_world_values(north, east, polarization, channel,
                                                                  np.zeros_like(east))
    assert np.allclose(np.radians(glon), xds["galactic_longitude"].values[east, north], rtol=0, atol=1e-12)
    assert np.allclose(np.radians(glat), xds["galactic_latitude"].values[east, north], rtol=0, atol=1e-12)
    assert np.allclose(frequency, np.asarray(FREQUENCIES)[channel], rtol=1e-15)
