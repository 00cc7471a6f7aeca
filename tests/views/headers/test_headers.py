"""Header files for legacy tools (zarrfs.views.headers), checked by opening them with the real tools.

Each case writes the array as a raw `data` file in C or Fortran order plus the header, opens it
with numpy / pynrrd / SimpleITK / GDAL and compares bit for bit with the numpy array.
"""

from __future__ import annotations

import io
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import ml_dtypes
import nrrd
import numpy as np
import pytest
import SimpleITK as sitk
import zarr

from zarrfs.views.headers.formats import mhd_header, npy_header, nrrd_header, vrt_header
from zarrfs.views.placement.core import Placement

pytestmark = pytest.mark.fast

ORDERS = [pytest.param(False, id="C"), pytest.param(True, id="F")]
HAS_GDAL = shutil.which("gdal_translate") is not None


def make_array(dtype: str | np.dtype[Any], shape: tuple[int, ...], seed: int = 0) -> np.ndarray[Any, Any]:
    """Random values over the whole range of the type, with NaN/inf/-0.0 among floats."""
    dt = np.dtype(dtype)
    rng = np.random.default_rng(seed)
    native = dt.newbyteorder("=")
    if dt.kind == "b":
        values: np.ndarray[Any, Any] = rng.integers(0, 2, shape).astype(bool)
    elif dt.kind in "iu":
        info = np.iinfo(native)
        values = rng.integers(info.min, info.max, shape, dtype=native, endpoint=True)
    elif dt.kind in "mM":
        values = rng.integers(-(2**62), 2**62, shape, dtype=np.int64).view(native)
    elif dt.kind in "fc":
        values = (rng.standard_normal(shape) * 1e3).astype(native)
        if dt.kind == "c":
            values = values + 1j * rng.standard_normal(shape).astype(native)
        flat = values.reshape(-1)
        specials = [np.nan, np.inf, -np.inf, -0.0]
        flat[: min(len(flat), 4)] = specials[: len(flat)]
    elif dt.kind in "SUV" or dt.names is not None:
        values = np.frombuffer(rng.bytes(int(np.prod(shape)) * dt.itemsize), dtype=np.uint8).view(dt)
        if dt.kind == "U":  # keep code points valid
            values = np.array([str(i % 997) for i in range(values.size)], dtype=dt)
        values = values.reshape(shape)
    else:
        raise AssertionError(dt)
    return values.astype(dt)


def write_data(directory: Path, array: np.ndarray[Any, Any], fortran: bool) -> None:
    (directory / "data").write_bytes(array.tobytes(order="F" if fortran else "C"))


def numeric_view(array: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """What a numeric-only tool sees: bool as uint8, datetimes as their int64 count."""
    if array.dtype.kind == "b":
        return array.view(np.uint8)
    if array.dtype.kind in "mM":
        return array.view(array.dtype.str[0] + "i8")
    return array


def assert_bit_equal(got: np.ndarray[Any, Any], want: np.ndarray[Any, Any]) -> None:
    """Same shape, same element kind and size, same bits (after bringing both to little-endian)."""
    assert got.shape == want.shape
    assert (got.dtype.kind, got.dtype.itemsize) == (want.dtype.kind, want.dtype.itemsize)
    little = (got.dtype.newbyteorder("<"), want.dtype.newbyteorder("<"))
    assert np.ascontiguousarray(got).astype(little[0]).tobytes() == \
        np.ascontiguousarray(want).astype(little[1]).tobytes()


# --- .npy -------------------------------------------------------------------------------------

NPY_DTYPES = ["<u2", ">f4", "|b1", "<c16", ">i8", "<M8[s]", ">m8[ms]", ">U3", "|S5", "|V7",
              [("a", "<i4"), ("b", ">f8"), ("c", "S3")]]
NPY_SHAPES = [(), (5,), (3, 4), (2, 3, 4), (0, 3), (3, 1, 4)]


@pytest.mark.parametrize("fortran", ORDERS)
@pytest.mark.parametrize("shape", NPY_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", NPY_DTYPES, ids=str)
def test_npy_loads_as_the_array(tmp_path: Path, dtype: Any, shape: tuple[int, ...], fortran: bool) -> None:
    array = make_array(dtype, shape)
    header = npy_header(array.dtype, shape, fortran)
    assert header is not None
    assert len(header) % 64 == 0
    path = tmp_path / "data.npy"
    path.write_bytes(header + array.tobytes(order="F" if fortran else "C"))
    loaded = np.load(path, mmap_mode="r")
    assert loaded.dtype == array.dtype
    assert_bit_equal(loaded, array)
    # Byte for byte what np.save writes for an array laid out like `data`.
    saved = io.BytesIO()
    np.save(saved, np.array(array, order="F" if fortran else "C"))
    assert saved.getvalue()[: len(header)] == header


def test_npy_uses_version_2_when_the_header_is_long(tmp_path: Path) -> None:
    dtype = np.dtype([(f"field_{i:05d}", "<u1") for i in range(5000)])
    array = make_array(dtype, (3,))
    header = npy_header(dtype, (3,), False)
    assert header is not None
    assert header[:8] == b"\x93NUMPY\x02\x00"
    path = tmp_path / "data.npy"
    path.write_bytes(header + array.tobytes())
    # np.load refuses headers over 10000 characters unless told otherwise.
    assert_bit_equal(np.load(path, mmap_mode="r", max_header_size=10**6), array)


@pytest.mark.parametrize("dtype", [np.dtype(ml_dtypes.bfloat16), np.dtype(ml_dtypes.float8_e4m3fn),
                                   np.dtype(ml_dtypes.int4), np.dtype(object),
                                   np.dtype([("\u0101", "<i4")])], ids=str)
def test_npy_none_for_undescribable_dtypes(dtype: np.dtype[Any]) -> None:
    assert npy_header(dtype, (2, 3), False) is None


# --- NRRD and MetaImage ---------------------------------------------------------------------------

ITK_DTYPES = ["|i1", "|u1", "<i2", ">u2", ">i4", "<u4", ">i8", "<u8", "<f4", ">f8", "|b1", ">M8[ms]"]
ITK_SHAPES = [(4, 5), (3, 4, 5), (2, 3, 2, 3)]


def sitk_array(path: Path) -> tuple[np.ndarray[Any, Any], tuple[float, ...]]:
    image = sitk.ReadImage(str(path))
    return sitk.GetArrayFromImage(image), tuple(image.GetSpacing())  # type: ignore[no-untyped-call]


@pytest.mark.parametrize("fortran", ORDERS)
@pytest.mark.parametrize("shape", ITK_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", ITK_DTYPES)
def test_nrrd_opens_in_pynrrd_and_simpleitk(tmp_path: Path, dtype: str, shape: tuple[int, ...],
                                            fortran: bool) -> None:
    array = make_array(dtype, shape)
    want = numeric_view(array)
    spacings = [0.5 + i for i in range(len(shape))]
    header = nrrd_header(array.dtype, shape, fortran, placement=Placement(spacing=tuple(spacings)))
    assert header is not None
    write_data(tmp_path, array, fortran)
    path = tmp_path / "data.raw.nhdr"
    path.write_bytes(header)
    # pynrrd lists axes as the file does (fastest first); index_order="C" reverses them.
    got, fields = nrrd.read(str(path), index_order="F" if fortran else "C")
    assert_bit_equal(got, want)
    assert list(fields["spacings"]) == (spacings if fortran else spacings[::-1])
    # SimpleITK: size and spacing fastest first, the numpy array is C order over those axes.
    image, itk_spacing = sitk_array(path)
    assert_bit_equal(image, want.T if fortran else want)
    assert list(itk_spacing) == (spacings if fortran else spacings[::-1])


@pytest.mark.parametrize("fortran", ORDERS)
@pytest.mark.parametrize("shape", ITK_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", ITK_DTYPES)
def test_mhd_opens_in_simpleitk(tmp_path: Path, dtype: str, shape: tuple[int, ...], fortran: bool) -> None:
    array = make_array(dtype, shape)
    spacings = [2.0 + i / 4 for i in range(len(shape))]
    header = mhd_header(array.dtype, shape, fortran, placement=Placement(spacing=tuple(spacings)))
    assert header is not None
    assert header.decode().splitlines()[-1] == "ElementDataFile = data"
    write_data(tmp_path, array, fortran)
    path = tmp_path / "data.mhd"
    path.write_bytes(header)
    image, itk_spacing = sitk_array(path)
    want = numeric_view(array)
    assert_bit_equal(image, want.T if fortran else want)
    assert list(itk_spacing) == (spacings if fortran else spacings[::-1])


def test_nrrd_rank_1_and_other_data_file(tmp_path: Path) -> None:
    array = make_array("<i2", (7,))
    (tmp_path / "values.raw").write_bytes(array.tobytes())
    header = nrrd_header(array.dtype, (7,), False, data_file="values.raw")
    assert header is not None
    path = tmp_path / "v.nhdr"
    path.write_bytes(header)
    assert_bit_equal(nrrd.read(str(path))[0], array)


def test_one_byte_types_have_no_endian_field() -> None:
    header = nrrd_header(np.dtype("u1"), (2, 3), False)
    assert header is not None and b"endian" not in header
    big = nrrd_header(np.dtype(">i4"), (2, 3), False)
    assert big is not None and b"endian: big\n" in big


@pytest.mark.parametrize("make", [nrrd_header, mhd_header])
@pytest.mark.parametrize("dtype", ["<f2", "<c8", ">c16", "|S4", "<U2", "|V4", "<f16",
                                   np.dtype([("a", "<i4")]), np.dtype(ml_dtypes.bfloat16)], ids=str)
def test_itk_formats_none_for_unsupported_types(make: Any, dtype: Any) -> None:
    assert make(np.dtype(dtype), (2, 3), False) is None


@pytest.mark.parametrize("make", [nrrd_header, mhd_header])
def test_itk_formats_none_for_rank_0_and_empty(make: Any) -> None:
    assert make(np.dtype("<u2"), (), False) is None
    assert make(np.dtype("<u2"), (0, 3), False) is None


def test_nrrd_none_beyond_16_dimensions() -> None:
    assert nrrd_header(np.dtype("u1"), (1,) * 17, False) is None
    assert nrrd_header(np.dtype("u1"), (1,) * 16, False) is not None


@pytest.mark.parametrize("make", [nrrd_header, mhd_header])
def test_bad_spacings_and_file_names_are_refused(make: Any) -> None:
    with pytest.raises(ValueError, match="spacings must be 2 positive finite numbers"):
        make(np.dtype("u1"), (2, 3), False, placement=Placement(spacing=(1.0,)))
    with pytest.raises(ValueError, match="spacings must be 2 positive finite numbers"):
        make(np.dtype("u1"), (2, 3), False, placement=Placement(spacing=(1.0, 0.0)))
    with pytest.raises(ValueError, match="data file name must be non-empty without whitespace"):
        make(np.dtype("u1"), (2, 3), False, data_file="my data")


# --- GDAL VRT -------------------------------------------------------------------------------------

GDAL_DTYPES = ["|u1", "|b1", "<i2", ">u2", ">i4", "<u4", "<i8", ">u8", ">f4", "<f8", ">c8", "<c16",
               "<M8[s]"]


GDAL_SHAPES = [(4, 5), (3, 4, 5)]


def gdal_translate(vrt: Path) -> subprocess.CompletedProcess[str]:
    """Copy the VRT with gdal_translate to an uncompressed Zarr beside it, out.zarr (the one
    raw writer that takes every GDAL type)."""
    return subprocess.run(["gdal_translate", "-q", "-of", "Zarr", "-co", "COMPRESS=NONE", str(vrt),
                           str(vrt.parent / "out.zarr")], capture_output=True, text=True, timeout=60)


def gdal_bands(translated: subprocess.CompletedProcess[str], out: Path,
               shape: tuple[int, ...]) -> np.ndarray[Any, Any]:
    """The bands gdal_translate wrote to `out`, stacked."""
    # gdal_translate can report an error and still exit 0.
    assert translated.returncode == 0 and "ERROR" not in translated.stderr, translated.stderr
    group = zarr.open_group(str(out), mode="r")
    names = sorted(group.array_keys(), key=lambda n: int(n[4:]) if n.startswith("Band") else 0)
    bands = []
    for name in names:
        band = group[name]
        assert isinstance(band, zarr.Array)
        bands.append(np.asarray(band[:]))
    assert len(bands) == (1 if len(shape) == 2 else shape[0])
    return bands[0] if len(shape) == 2 else np.stack(bands)


GdalCase = tuple[str, tuple[int, ...], bool]
GdalCopies = dict[GdalCase, tuple[Path, subprocess.CompletedProcess[str]]]


@pytest.fixture(scope="module")
def gdal_copies(tmp_path_factory: pytest.TempPathFactory) -> GdalCopies:
    """Every case of test_vrt_opens_in_gdal written (data and data.vrt) and copied by
    gdal_translate, four at a time: the 52 runs are mostly process start-up, which one after
    another took 5-10 s of the fast tier."""
    root = tmp_path_factory.mktemp("vrt")
    cases = [(d, s, f) for d in GDAL_DTYPES for s in GDAL_SHAPES for f in (False, True)]

    def copy(n: int) -> tuple[Path, subprocess.CompletedProcess[str]]:
        dtype, shape, fortran = cases[n]
        directory = root / str(n)
        directory.mkdir()
        array = make_array(dtype, shape)
        header = vrt_header(array.dtype, shape, fortran)
        assert header is not None
        write_data(directory, array, fortran)
        (directory / "data.vrt").write_bytes(header)
        return directory / "out.zarr", gdal_translate(directory / "data.vrt")

    with ThreadPoolExecutor(4) as pool:
        return dict(zip(cases, pool.map(copy, range(len(cases))), strict=True))


@pytest.mark.skipif(not HAS_GDAL, reason="gdal_translate (Debian gdal-bin) not installed")
@pytest.mark.parametrize("fortran", ORDERS)
@pytest.mark.parametrize("shape", GDAL_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", GDAL_DTYPES)
def test_vrt_opens_in_gdal(dtype: str, shape: tuple[int, ...], fortran: bool,
                           gdal_copies: GdalCopies) -> None:
    array = make_array(dtype, shape)
    assert vrt_header(array.dtype, shape, fortran) is not None
    out, translated = gdal_copies[(dtype, shape, fortran)]
    assert_bit_equal(gdal_bands(translated, out, shape), numeric_view(array))


@pytest.mark.parametrize("dtype", ["|i1", "<f2", "|S4", "<U1", "|V2", np.dtype([("a", "<i4")]),
                                   np.dtype(ml_dtypes.bfloat16)], ids=str)
def test_vrt_none_for_unsupported_types(dtype: Any) -> None:
    assert vrt_header(np.dtype(dtype), (2, 3), False) is None


@pytest.mark.parametrize("shape", [(), (5,), (2, 3, 4, 5), (0, 4), (3, 0, 2)], ids=str)
def test_vrt_none_for_other_ranks_and_empty(shape: tuple[int, ...]) -> None:
    assert vrt_header(np.dtype("<u2"), shape, False) is None


def test_vrt_none_when_gdal_offsets_overflow() -> None:
    # GDAL 3.6 parses <PixelOffset> as a C int; in F order it is bands*lines*itemsize.
    assert vrt_header(np.dtype("<f8"), (2, 2**28, 2), True) is None
    assert vrt_header(np.dtype("<f8"), (2, 2**28, 2), False) is not None
