"""data.fits's header without a mount (zarrfs.views.fits), read by astropy.io.fits and
astropy.wcs: the card rules, every element type FITS holds (BITPIX, BZERO) and none it does not,
attributes as keywords, and the WCS of evenly spaced coordinates, CF latitude and longitude,
GeoZarr's transform and OME-Zarr's scales; then the file's bytes through its reading ahead,
slabs whose top bits are flipped included (zarrfs.views.fits.file on a real array, no FUSE)."""

from __future__ import annotations

import math
import subprocess
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from astropy.io import fits
from astropy.wcs import WCS

from tests.helpers.local_arrays import create_zstd_array
from zarrfs.array.reads import readahead, slab_layout
from zarrfs.array_metadata import open_array
from zarrfs.store import Store
from zarrfs.views import RegionFile
from zarrfs.views.files import CannotHold
from zarrfs.views.fits import fits_file, fits_header
from zarrfs.views.fits.cards import commentary, header_bytes, hierarch, keyword_card
from zarrfs.views.placement import NOWHERE, WGS84, Axis, Coordinate, Placement, Surroundings

pytestmark = pytest.mark.fast

HELD = {"uint8": (8, None), "int8": (8, -128), "int16": (16, None), "uint16": (16, 32768),
        "int32": (32, None), "uint32": (32, 2**31), "int64": (64, None), "uint64": (64, 2**63),
        "float32": (-32, None), "float64": (-64, None)}


def _header(dtype: str, shape: tuple[int, ...], placement: Placement = NOWHERE,
            fortran: bool = False) -> fits.Header:
    made = fits_header(np.dtype(dtype), shape, fortran, lambda: placement)
    assert len(made) % 2880 == 0 and made.isascii()
    return fits.Header.fromstring(made.decode("ascii"))


def _fits_bytes(values: np.ndarray, placement: Placement = NOWHERE) -> bytes:
    """The file as data.fits lays it out, its elements made here by numpy: value - BZERO."""
    header = fits_header(values.dtype, values.shape, False, lambda: placement)
    bzero = HELD[values.dtype.name][1]
    stored = values if bzero is None else (values.astype(object) - bzero).astype(
        np.dtype(f"{'u' if values.dtype.kind == 'i' else 'i'}{values.dtype.itemsize}"))
    elements = stored.astype(stored.dtype.newbyteorder(">")).tobytes()
    return header + elements + bytes(-len(elements) % 2880)


@pytest.mark.parametrize("dtype", sorted(HELD))
def test_every_type_fits_holds_reads_back_as_its_values(dtype: str, tmp_path: Path) -> None:
    shape = (3, 4, 5)
    info = np.iinfo(dtype) if dtype[0] in "iu" else None
    values = (np.random.default_rng(1).integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
              if info else np.random.default_rng(1).standard_normal(shape).astype(dtype))
    header = _header(dtype, shape)
    bitpix, bzero = HELD[dtype]
    assert (header["BITPIX"], header["NAXIS"], header["NAXIS1"], header["NAXIS2"], header["NAXIS3"]) == (
        bitpix, 3, 5, 4, 3)
    assert header.get("BZERO") == bzero
    (tmp_path / "a.fits").write_bytes(_fits_bytes(values))
    _verified([tmp_path / "a.fits"])
    with fits.HDUList.fromstring(_fits_bytes(values)) as hdus:
        hdus.verify("exception")
        got = hdus[0].data
        assert got.dtype.newbyteorder("=") == values.dtype and np.array_equal(got, values)


@pytest.mark.parametrize(("dtype", "shape", "why"), [
    ("float16", (3,), "float16"), ("complex64", (3,), "complex64"), ("bool", (3,), "bool"),
    ("<U4", (3,), "str"), ("<M8[s]", (3,), "datetime64"), ("int16", (), "not 0"),
    ("int16", (1,) * 1000, "not 1000")])
def test_what_fits_cannot_hold_is_refused_saying_why(dtype: str, shape: tuple[int, ...], why: str) -> None:
    with pytest.raises(CannotHold, match=why):
        fits_header(np.dtype(dtype), shape, False, lambda: NOWHERE)


def test_999_axes_and_empty_axes_are_held() -> None:
    header = _header("uint8", (1,) * 998 + (2,))
    assert header["NAXIS"] == 999 and header["NAXIS1"] == 2 and header["NAXIS999"] == 1
    assert _header("int16", (0, 4))["NAXIS2"] == 0


def test_cards_read_as_astropy_reads_them() -> None:
    text = "it's " * 40
    cards = [*keyword_card("SIMPLE", True), *keyword_card("BITPIX", 8), *keyword_card("NAXIS", 0),
             *keyword_card("LONGSTRN", "OGIP 1.0"), *keyword_card("QUOTED", text),
             *keyword_card("SHORT", "a'b"),
             *keyword_card("TINY", 5e-324), *keyword_card("HUGE", -1.7976931348623157e308),
             *keyword_card("ROUND", 1e20), *keyword_card("MOST", 2**63 - 1), *keyword_card("LEAST", -(2**63)),
             *keyword_card("NO", False), hierarch("a.long name_here", 0.25),
             *commentary("HISTORY", "first\n" + "x" * 100)]
    assert all(len(card) <= 80 for card in cards)
    header = fits.Header.fromstring(header_bytes(cards).decode("ascii"))
    assert header["QUOTED"] == text.rstrip() and header["SHORT"] == "a'b"
    assert (header["TINY"], header["HUGE"], header["ROUND"]) == (5e-324, -1.7976931348623157e308, 1e20)
    assert (header["MOST"], header["LEAST"], header["NO"]) == (2**63 - 1, -(2**63), False)
    assert header["a.long name_here"] == 0.25
    assert list(header["HISTORY"]) == ["first", "x" * 72, "x" * 28]
    assert hierarch("x=y", 1) is None and hierarch("long", "y" * 80) is None


def test_attributes_are_keywords_where_fits_holds_them() -> None:
    attributes = {"units": "K", "long_name": "air temperature", "history": "made\nchanged",
                  "scale": 2.5, "count": [7], "flag": True, "title": "t" * 150, "bitpix": 3, "CTYPE1": "x",
                  "nested": {"a": 1}, "pair": [1, 2], "missing": math.nan, "text": "caf\u00e9",
                  "large": 2**64, "description": "d" * 100}
    header = _header("int16", (2, 3), Placement(surroundings=Surroundings(attributes, (None, None), {})))
    assert header["BUNIT"] == "K" and header["long_name"] == "air temperature"
    assert list(header["HISTORY"]) == ["made", "changed"]
    assert (header["SCALE"], header["COUNT"], header["FLAG"]) == (2.5, 7, True)
    assert header["TITLE"] == "t" * 150 and header["LONGSTRN"] == "OGIP 1.0"
    assert header["BITPIX"] == 16 and "CTYPE1" not in header
    for absent in ("NESTED", "PAIR", "MISSING", "TEXT", "LARGE", "UNITS", "description"):
        assert absent not in header, absent


def test_attributes_named_as_the_standards_keywords_verify(tmp_path: Path) -> None:
    """Attributes whose names FITS gives a meaning (a type, a date's form) are held only where
    their values have it: fitsverify finds nothing wrong."""
    attributes = {"date": "yesterday", "date_created": "2020", "DATE-BEG": "x", "object": 5, "origin": "lab",
                  "telescop": 1.5, "mjd-obs": "x", "epoch": "J2000", "obsgeo-x": "here", "ttype1": 2,
                  "blocked": True, "extname": 3, "instrume": "camera", "units": "u" * 80}
    values = np.arange(6, dtype=np.uint16).reshape(2, 3)
    path = tmp_path / "a.fits"
    long_name = _coordinate("n" * 80, [0.0, 1.0])  # (a name of more than a card: no CNAME)
    around = Surroundings(attributes, (long_name, None), {})
    path.write_bytes(_fits_bytes(values, Placement(surroundings=around)))
    _verified([path])
    header = fits.getheader(path)
    assert header["CTYPE2"] == "LINEAR" and "CNAME2" not in header and "BUNIT" not in header
    assert (header["ORIGIN"], header["INSTRUME"], header["date_created"]) == ("lab", "camera", "2020")
    for absent in ("DATE", "DATE-BEG", "OBJECT", "TELESCOP", "MJD-OBS", "EPOCH", "OBSGEO-X", "TTYPE1",
                   "BLOCKED", "EXTNAME"):
        assert absent not in header, absent


def _verified(paths: list[Path]) -> None:
    result = subprocess.run(["fitsverify", "-q", *map(str, paths)], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0 and result.stdout.count("verification OK") == len(paths), result.stdout


def _coordinate(name: str, values: Any, **attributes: Any) -> Coordinate:
    return Coordinate(name, np.asarray(values), attributes)


def _world(header: fits.Header, *pixels: Any) -> list[np.ndarray]:
    """World coordinates of 0-based FITS pixels (FITS axis order)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (astropy's notes on defaults it fills in)
        return [np.asarray(w) for w in WCS(header).pixel_to_world_values(*pixels)]


@pytest.mark.parametrize("fortran", [False, True])
def test_evenly_spaced_coordinates_give_linear_axes(fortran: bool) -> None:
    x = _coordinate("x", np.arange(5) * 30.0 + 1000.0, units="m")
    depth = _coordinate("depth", [1.0, 2.0, 5.0])  # (not evenly spaced: counted from 0)
    time = _coordinate("time", [0, 6, 12, 18], units="hours since 2000-01-01")
    coordinates = (time, depth, x)
    header = _header("float32", (4, 3, 5)[::-1] if fortran else (4, 3, 5),
                     Placement(surroundings=Surroundings({}, coordinates, {})), fortran)
    number = {0: 1, 1: 2, 2: 3} if fortran else {0: 3, 1: 2, 2: 1}  # array axis -> FITS axis
    assert header[f"CTYPE{number[2]}"] == "X" and header[f"CUNIT{number[2]}"] == "m"
    assert header[f"CTYPE{number[0]}"] == "LINEAR" and header[f"CNAME{number[0]}"] == "time"
    assert (header[f"CTYPE{number[1]}"], header[f"CRVAL{number[1]}"], header[f"CDELT{number[1]}"]) == (
        "DEPTH", 0.0, 1.0)
    pixels = [np.arange(4)] * 3
    world = _world(header, *pixels)
    assert np.allclose(world[number[2] - 1], 1000.0 + 30.0 * np.arange(4))
    assert np.allclose(world[number[0] - 1], 6.0 * np.arange(4))


@pytest.mark.parametrize("descending", [True, False])
def test_latitude_and_longitude_are_a_celestial_pair(descending: bool) -> None:
    lat = np.linspace(60.0, -30.0, 7) if descending else np.linspace(-30.0, 60.0, 7)
    lon = np.arange(-20.0, 30.0, 2.5)
    coordinates = (_coordinate("time", [0.0, 1.0]), _coordinate("lat", lat, units="degrees_north"),
                   _coordinate("longitude", lon))
    header = _header("float32", (2, 7, 20), Placement(surroundings=Surroundings({}, coordinates, {})))
    assert (header["CTYPE1"], header["CTYPE2"]) == ("TLON-CAR", "TLAT-CAR")
    wcs = WCS(header)
    assert wcs.has_celestial and wcs.wcs.lng == 0 and wcs.wcs.lat == 1
    grid = np.meshgrid(np.arange(20), np.arange(7), indexing="ij")
    world = _world(header, grid[0].ravel(), grid[1].ravel(), np.zeros(grid[0].size))
    assert np.allclose((world[0] - lon[grid[0].ravel()] + 180) % 360 - 180, 0, atol=1e-9)
    assert np.allclose(world[1], lat[grid[1].ravel()], atol=1e-9)


def test_a_geozarr_transform_in_wgs84_is_the_same_pair() -> None:
    placement = Placement(geotransform=(10.0, 0.5, 0.0, 50.0, 0.0, -0.25), crs=WGS84)
    header = _header("uint16", (8, 6), placement)
    world = _world(header, np.array([0, 5]), np.array([0, 7]))
    assert np.allclose(world[0], [10.25, 12.75]) and np.allclose(world[1], [49.875, 48.125])


def test_ome_zarr_scales_give_axes_in_metres_and_seconds() -> None:
    axes = (Axis("t", "time", "millisecond"), Axis("z", "space", "micrometer"), Axis("y", "space", None))
    placement = Placement(spacing=(40.0, 2.0, 0.5), origin=(0.0, 10.0, 0.0), axes=axes)
    header = _header("uint8", (3, 4, 5), placement)
    assert (header["CTYPE3"], header["CUNIT3"]) == ("T", "s") and header["CDELT3"] == pytest.approx(0.04)
    assert (header["CTYPE2"], header["CUNIT2"]) == ("Z", "m") and header["CRVAL2"] == pytest.approx(1e-5)
    assert header["CTYPE1"] == "Y" and "CUNIT1" not in header and header["CDELT1"] == 0.5


# -- the file: header, elements (flipped where BZERO says), zeros ------------------------------

SHAPE, CHUNKS = (256, 192), (32, 64)


@pytest.mark.usefixtures("stream_threads")
@pytest.mark.parametrize("dtype", ["uint16", "int8", "float32"])
def test_the_file_read_in_order_is_its_bytes_from_flipped_slabs(dtype: str, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slab_layout, "SLAB_BYTES", CHUNKS[0] * SHAPE[1] * np.dtype(dtype).itemsize)
    monkeypatch.setattr(readahead, "STREAK_BYTES", 4096)  # (slabs after one read in order)
    values = (np.arange(math.prod(SHAPE)) * 7919).astype(dtype).reshape(SHAPE)
    create_zstd_array(tmp_path / "a.zarr", values, CHUNKS)
    array = open_array(Store.open(str(tmp_path / "a.zarr")), cache_bytes=64 << 20, threads=2)
    try:
        header = fits_header(values.dtype, SHAPE, False, lambda: NOWHERE)
        file = fits_file(RegionFile(array, None), lambda: header)
        want = _fits_bytes(values)
        assert file.size == len(want)
        reading, found, slabbed = file.readahead(), bytearray(), 0
        for offset in range(0, file.size, 5000):  # (across the header's end and into the zeros)
            piece = reading.ready(offset, 5000)
            slabbed += piece is not None
            found += piece if piece is not None else reading.read(offset, 5000)
        reading.close()
        assert bytes(found) == want
        assert slabbed, "no read was answered from a slab"
        assert bytes(file.read(len(header) + 1, 9)) == want[len(header) + 1 : len(header) + 10]  # (cache)
    finally:
        array.close()
