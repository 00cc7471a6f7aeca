"""The header views beside `data` (`data.npy`, `data.raw.nhdr`, `data.mhd`, `data.vrt`) on a real
mount, each opened by the tool it is made for (numpy, pynrrd, SimpleITK, GDAL's gdal_translate)
and compared bit for bit with what zarr-python wrote: several element types, ranks 1-4, both
byte orders of the files (`-o endian=`), C and Fortran order (`-o order=F`); writes through a
`np.load(..., mmap_mode="r+")` map landing in the store; the header being read-only; the
`-o views=` option; views left out where the format has no such element type or rank; headers
following a resize; voxel spacings from an OME-Zarr group.

The header formats themselves are unit-tested in test_headers.py; here the point is the mount.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import warnings
from pathlib import Path
from typing import Any

import h5py
import hdf5plugin  # noqa: F401  (registers the zstd filter: data.h5 passes zstd chunks through)
import nrrd
import numpy as np
import pytest
import SimpleITK as sitk
import tifffile
import zarr
from ome_zarr.writer import write_image
from zarr.codecs import BytesCodec

from tests.helpers.mounting import VIEW_FILES, ZARRFS

HAS_GDAL = shutil.which("gdal_translate") is not None
ALL_VIEWS = {"npy", "raw.nhdr", "mhd", "vrt"}
TIFF = {"tif"}  # (data.tif: rank 2 and more, numbers TIFF holds)
H5 = {"h5"}  # (data.h5: rank 1 and more, ints and floats)
NII = {"nii"}  # (data.nii: rank 1 to 7, numbers but float16: tests/views/nifti/test_nifti_view.py)
MRC = {"mrc"}  # (data.mrc: rank 2 to 4 of MRC2014's modes: tests/views/mrc/test_mrc_view.py)
# (data.fits: rank 1 to 999, integers and 32- and 64-bit floats: tests/views/fits/test_fits_view.py)
FITS = {"fits"}


# -- helpers ------------------------------------------------------------------------------------


def _values(dtype: str, shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """Values over the whole range of the type (no NaN: zarr fill semantics stay simple)."""
    dt = np.dtype(dtype)
    rng = np.random.default_rng(seed)
    if dt.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, shape, dtype=dt.newbyteorder("="), endpoint=True).astype(dt)
    if dt.kind in "mM":
        return rng.integers(-(2**40), 2**40, shape, dtype=np.int64).view(dt.newbyteorder("="))
    if dt.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
    if dt.kind == "f":
        values = (rng.standard_normal(shape) * 1e3).astype(dt)
        values.reshape(-1)[:2] = [np.inf, -0.0]
        return values
    if dt.kind == "S":
        return np.array([b"x%d" % i for i in range(int(np.prod(shape)))], dtype=dt).reshape(shape)
    if dt.kind == "U":
        return np.array([str(i % 997) for i in range(int(np.prod(shape)))], dtype=dt).reshape(shape)
    raise AssertionError(dt)


def _numeric(array: np.ndarray) -> np.ndarray:
    """What a numeric-only tool sees: bool as uint8, datetimes as their int64 count."""
    if array.dtype.kind == "b":
        return array.view(np.uint8)
    if array.dtype.kind in "mM":
        return array.view(np.int64)
    return array


def _assert_bit_equal(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape
    assert (got.dtype.kind, got.dtype.itemsize) == (want.dtype.kind, want.dtype.itemsize)
    little = (got.dtype.newbyteorder("<"), want.dtype.newbyteorder("<"))
    assert np.ascontiguousarray(got).astype(little[0]).tobytes() == \
        np.ascontiguousarray(want).astype(little[1]).tobytes()


def _read_nrrd(path: Path, fortran: bool) -> tuple[np.ndarray, dict[str, Any]]:
    """The data in the array's own axis order (pynrrd's index_order="C" reverses the header's
    fastest-first axes); fields as read, plus `axis spacings` in the array's axis order."""
    data, fields = nrrd.read(str(path), index_order="F" if fortran else "C")
    if "spacings" in fields or "space directions" in fields:  # (directions: placed with an origin)
        given = fields.get("spacings")
        given = np.linalg.norm(fields["space directions"], axis=1) if given is None else given
        spacings = [float(v) for v in given]
        fields["axis spacings"] = spacings if fortran else spacings[::-1]
    return data, fields


def _read_sitk(path: Path, fortran: bool) -> tuple[np.ndarray, list[float]]:
    """The image as an array in the array's own axis order, and the spacings likewise."""
    image = sitk.ReadImage(str(path))
    values = sitk.GetArrayFromImage(image)  # C order over the header's axes (fastest last)
    spacing = list(image.GetSpacing())  # type: ignore[no-untyped-call]  # fastest first
    if fortran:
        return values.T, spacing
    return values, spacing[::-1]


def _read_gdal(vrt: Path, work: Path, rank: int) -> np.ndarray:
    """The VRT copied by gdal_translate to an uncompressed Zarr (a raw writer that takes every
    GDAL type), bands stacked as the first axis for rank 3."""
    out = work / f"gdal-{len(list(work.glob('gdal-*')))}.zarr"
    result = subprocess.run(["gdal_translate", "-q", "-of", "Zarr", "-co", "COMPRESS=NONE", str(vrt),
                             str(out)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "ERROR" not in result.stderr, result.stderr
    group = zarr.open_group(str(out), mode="r")
    names = sorted(group.array_keys(), key=lambda n: int(n[4:]) if n.startswith("Band") else 0)
    bands = [np.asarray(group[name][:]) for name in names]  # type: ignore[index]  # arrays
    return bands[0] if rank == 2 else np.stack(bands)


def _views_in(directory: Path) -> set[str]:
    return {name.removeprefix("data.") for name in os.listdir(directory) if name in VIEW_FILES}


# -- every view, read by its tool ---------------------------------------------------------------

# name: (dtype as stored, shape, chunks, views the formats can describe)
MATRIX: dict[str, tuple[str, tuple[int, ...], tuple[int, ...], set[str]]] = {
    "u1": ("|u1", (7, 9), (4, 4), ALL_VIEWS | TIFF | H5 | NII | FITS),  # (MRC has no uint8)
    "i2": ("<i2", (3, 5, 6), (2, 2, 4), ALL_VIEWS | TIFF | H5 | NII | MRC | FITS),
    "u2_big": (">u2", (6, 11), (4, 5), ALL_VIEWS | TIFF | H5 | NII | MRC | FITS),
    # (VRT: rank 2 and 3)
    "f4": ("<f4", (2, 3, 4, 5), (1, 2, 3, 2), {"npy", "raw.nhdr", "mhd", "tif", "h5", "nii", "mrc"} | FITS),
    "f8_big": (">f8", (4, 3, 5), (3, 3, 3), ALL_VIEWS | TIFF | H5 | NII | FITS),
    "i4": ("<i4", (5, 6), (5, 6), ALL_VIEWS | TIFF | H5 | NII | FITS),
    "u8": ("<u8", (9, 4), (4, 4), ALL_VIEWS | TIFF | H5 | NII | FITS),
    "i8": ("<i8", (3, 4, 2), (2, 2, 2), ALL_VIEWS | TIFF | H5 | NII | FITS),
    "bool": ("|b1", (5, 4, 3), (2, 2, 2), ALL_VIEWS | TIFF | H5 | NII),  # as uint8 (HDF5: int8)
    # (GDAL 3.6: no Int8)
    "i1": ("|i1", (6, 5), (4, 4), {"npy", "raw.nhdr", "mhd", "tif", "h5", "nii", "mrc"} | FITS),
    "c8": ("<c8", (4, 6), (3, 3), {"npy", "vrt", "tif", "h5", "nii", "mrc"}),  # NRRD, MetaImage: no complex
    "f2": ("<f2", (4, 6), (3, 3), {"npy", "tif", "h5"} | MRC),
    "rank1": ("<u2", (13,), (5,), {"npy", "raw.nhdr", "mhd", "h5"} | NII | FITS),  # (TIFF: rank 2 and more)
    "rank0": ("<i4", (), (), {"npy", "h5"}),
    "time": ("<M8[s]", (4, 5), (3, 3), ALL_VIEWS | H5),  # as the int64 count (TIFF: numbers only)
}


@pytest.fixture(scope="module")
def matrix_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, np.ndarray]]:
    """One v3 group holding every array of MATRIX (big-endian ones stored big-endian)."""
    path = tmp_path_factory.mktemp("views") / "matrix.zarr"
    group = zarr.open_group(path, mode="w", zarr_format=3)
    expected = {}
    for seed, (name, (dtype, shape, chunks, _)) in enumerate(MATRIX.items()):
        values = _values(dtype, shape, seed)
        serializer: Any = BytesCodec(endian="big") if dtype.startswith(">") else "auto"
        array = group.create_array(name, shape=shape, dtype=values.dtype.newbyteorder("="),
                                   chunks=chunks or "auto", serializer=serializer)
        array[...] = values
        expected[name] = np.asarray(zarr.open_array(path / name, mode="r")[...])
        _assert_bit_equal(expected[name], values)  # the writer's own round trip
    for name in MATRIX:
        if MATRIX[name][0].startswith(">"):
            assert json.loads((path / name / "zarr.json").read_bytes())["codecs"][0] == \
                {"name": "bytes", "configuration": {"endian": "big"}}
    return path, expected


@pytest.mark.parametrize("options", [(), ("endian=big",), ("order=F",), ("order=F", "endian=big")],
                         ids=["C-little", "C-big", "F-little", "F-big"])
def test_every_view_reads_as_the_array(matrix_store: tuple[Path, dict[str, np.ndarray]],
                                       mount_array: Any, tmp_path: Path, options: tuple[str, ...]) -> None:
    path, expected = matrix_store
    fortran = "order=F" in options
    big = "endian=big" in options
    mount = mount_array(path, ["ro", *options])
    for name, (_, shape, _, views) in MATRIX.items():
        directory = mount.path / name
        want = expected[name]
        stack = MRC if fortran and len(shape) == 4 else set()  # (MRC: its images would not be contiguous)
        assert _views_in(directory) == views - stack, name
        raw = (directory / "data").read_bytes()
        assert raw == want.astype(want.dtype.newbyteorder(">" if big else "<")).tobytes(
            order="F" if fortran else "C"), name

        loaded = np.load(directory / "data.npy", mmap_mode="r")
        _assert_bit_equal(loaded, want)
        assert loaded.dtype == want.dtype.newbyteorder(">" if big else "<") or want.dtype.itemsize == 1
        if "raw.nhdr" in views:
            got, fields = _read_nrrd(directory / "data.raw.nhdr", fortran)
            _assert_bit_equal(got, _numeric(want))
            assert "spacings" not in fields
            if want.dtype.itemsize > 1:
                assert fields["endian"] == ("big" if big else "little")
            if len(shape) >= 2:  # SimpleITK has no 1-d images
                image, _ = _read_sitk(directory / "data.raw.nhdr", fortran)
                _assert_bit_equal(image, _numeric(want))
        if "mhd" in views and len(shape) >= 2:
            image, spacing = _read_sitk(directory / "data.mhd", fortran)
            _assert_bit_equal(image, _numeric(want))
            assert spacing == [1.0] * len(shape)
        if "vrt" in views and HAS_GDAL:
            _assert_bit_equal(_read_gdal(directory / "data.vrt", tmp_path, len(shape)), _numeric(want))
        if "tif" in views:  # (in the array's C order, whatever order= says of `data`)
            with tifffile.TiffFile(directory / "data.tif") as tiff:
                assert tiff.byteorder == (">" if big else "<")
                pixels = np.stack([page.asarray() for page in tiff.pages])
            _assert_bit_equal(pixels.reshape(shape), _numeric(want))
        if "h5" in views:  # (in the array's C order, as data.tif)
            with h5py.File(directory / "data.h5", "r") as f:
                as_stored = want.view(np.int8) if want.dtype.kind == "b" else _numeric(want)  # (bool: bytes)
                _assert_bit_equal(f["data"][...], as_stored)


@pytest.mark.fast
def test_fortran_order_chunk_files_and_data(matrix_store: tuple[Path, dict[str, np.ndarray]],
                                            mount_array: Any) -> None:
    """order=F: element [i, j] at i + j*shape[0], in `data` and in each (full-size) chunk file."""
    path, expected = matrix_store
    mount = mount_array(path, ["ro", "order=F"])
    want = expected["u2_big"]  # (6, 11), chunks (4, 5)
    flat = np.fromfile(mount.path / "u2_big" / "data", dtype="<u2")
    assert np.array_equal(flat.reshape(want.shape, order="F"), want)
    assert flat[1 + 2 * 6] == want[1, 2]
    chunk = np.fromfile(mount.path / "u2_big" / "chunks" / "c" / "1" / "2", dtype="<u2")
    assert chunk.size == 4 * 5
    block = chunk.reshape((4, 5), order="F")
    assert np.array_equal(block[:2, :1], want[4:6, 10:11])  # the rest is overhang (fill value)
    assert not block[2:].any() and not block[:, 1:].any()


# -- which views there are ----------------------------------------------------------------------


def test_views_option_picks_the_views(matrix_store: tuple[Path, dict[str, np.ndarray]],
                                      mount_array: Any) -> None:
    path, expected = matrix_store
    none = mount_array(path, ["ro", "views=none"])
    for name in MATRIX:
        assert sorted(os.listdir(none.path / name)) == ["chunks", "data", "zarr.json"]
    with pytest.raises(FileNotFoundError):
        (none.path / "u1" / "data.npy").stat()

    some = mount_array(path, ["ro", "views=npy:vrt"])
    assert sorted(os.listdir(some.path / "u1")) == ["chunks", "data", "data.npy", "data.vrt", "zarr.json"]
    assert sorted(os.listdir(some.path / "f4")) == ["chunks", "data", "data.npy", "zarr.json"]
    for absent in ("data.raw.nhdr", "data.mhd"):
        with pytest.raises(FileNotFoundError):
            (some.path / "u1" / absent).stat()
    assert np.array_equal(np.load(some.path / "i2" / "data.npy"), expected["i2"])

    one = mount_array(path, ["ro", "views=mhd"])
    assert sorted(os.listdir(one.path / "i2")) == ["chunks", "data", "data.mhd", "zarr.json"]

    # user.zarr.views names what the directory shows made from the data, on the directory and `data`
    for mount, name in ((none, "u1"), (some, "u1"), (some, "f4"), (one, "i2")):
        shown = sorted(n for n in os.listdir(mount.path / name) if n.startswith("data"))
        for where in (mount.path / name, mount.path / name / "data"):
            assert sorted(json.loads(os.getxattr(where, "user.zarr.views"))) == shown
    assert json.loads(os.getxattr(none.path, "user.zarr.views")) == []
    every = mount_array(path, ["ro"])
    group_views = sorted(n for n in os.listdir(every.path) if n.startswith("data"))
    assert "data.h5" in group_views
    assert sorted(json.loads(os.getxattr(every.path, "user.zarr.views"))) == group_views
    u1_views = json.loads(os.getxattr(every.path / "u1", "user.zarr.views"))
    assert {"data", "data.npy", "data.h5", "data.tif"} <= set(u1_views)


@pytest.mark.parametrize("bad", ["npy:tiff", "", "npy,nrrd"])
def test_unknown_views_are_refused(matrix_store: tuple[Path, dict[str, np.ndarray]], tmp_path: Path,
                                   bad: str) -> None:
    path, _ = matrix_store
    (tmp_path / "mnt").mkdir()
    result = subprocess.run([ZARRFS, "mount", "-f", str(path / "u1"), str(tmp_path / "mnt"), "-o",
                             f"ro,views={bad}"], capture_output=True, text=True, timeout=30)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr


def test_views_absent_for_types_the_formats_lack(tmp_path: Path, mount_array: Any) -> None:
    """A v2 group with element types only .npy can describe (or none: structured with a
    non-latin-1 field name is still described by npy); views that exist read right."""
    path = tmp_path / "odd.zarr"
    group = zarr.open_group(path, mode="w", zarr_format=2)
    cases = {"s4": ("|S4", {"npy", "h5"}), "u3": ("<U3", {"npy", "h5"}),
             "f2": (">f2", {"npy", "tif", "h5"} | MRC), "c16": (">c16", {"npy", "vrt", "tif", "h5"} | NII),
             "b1": ("|b1", ALL_VIEWS | TIFF | H5 | NII)}
    expected = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, (dtype, _) in cases.items():
            values = _values(dtype, (5, 3))
            array = group.create_array(name, shape=(5, 3), dtype=dtype, chunks=(2, 2))
            array[...] = values
            expected[name] = values
        record = np.dtype([("a", "<i4"), ("b", "S2")])
        rec = np.zeros((4,), dtype=record)
        rec["a"], rec["b"] = [1, -2, 3, 4], [b"x", b"yz", b"", b"q"]
        group.create_array("rec", shape=(4,), dtype=record, chunks=(3,), fill_value=None)[...] = rec
    mount = mount_array(path, ["ro"])
    for name, (_, views) in cases.items():
        assert _views_in(mount.path / name) == views, name
        _assert_bit_equal(np.load(mount.path / name / "data.npy", mmap_mode="r"), expected[name])
    assert _views_in(mount.path / "rec") == {"npy"}
    loaded = np.load(mount.path / "rec" / "data.npy")
    assert loaded.dtype == record and loaded.tobytes() == rec.tobytes()
    if HAS_GDAL:
        _assert_bit_equal(_read_gdal(mount.path / "c16" / "data.vrt", tmp_path, 2), expected["c16"])


# -- writing through data.npy -----------------------------------------------------------------


def _store_array(path: Path, fmt: int, *, sharded: bool = False, big: bool = False) -> np.ndarray:
    values = _values("<i4", (20, 30), seed=fmt)
    if fmt == 2:
        array = zarr.create_array(path, shape=(20, 30), dtype=">i4" if big else "<i4", chunks=(8, 7),
                                  zarr_format=2, fill_value=0)
    else:
        array = zarr.create_array(path, shape=(20, 30), dtype="<i4", chunks=(4, 5),
                                  shards=(8, 15) if sharded else None, fill_value=0,
                                  serializer=BytesCodec(endian="big") if big else "auto")
    array[...] = values
    return values


@pytest.mark.parametrize(("fmt", "sharded", "options"), [
    (3, False, ()), (3, True, ("endian=big",)), (2, False, ("order=F",)),
    (3, True, ("order=F", "endian=big"))],
    ids=["v3", "v3-sharded-big", "v2-F", "v3-sharded-F-big"])
def test_npy_mmap_writes_land_in_the_store(tmp_path: Path, mount_array: Any, fmt: int, sharded: bool,
                                           options: tuple[str, ...]) -> None:
    path = tmp_path / "a.zarr"
    want = _store_array(path, fmt, sharded=sharded, big=fmt == 2)
    mount = mount_array(path, ["rw", *options])
    m = np.load(mount.path / "data.npy", mmap_mode="r+")
    assert m.shape == (20, 30) and np.array_equal(m, want)
    m[3, 4] = -12345
    m[17:20, 25:30] = 777  # an edge of the grid
    m[:, 0] = np.arange(20)
    m.flush()
    del m
    want[3, 4] = -12345
    want[17:20, 25:30] = 777
    want[:, 0] = np.arange(20)
    assert np.array_equal(np.load(mount.path / "data.npy"), want)
    assert mount.unmount() == 0
    assert np.array_equal(zarr.open_array(path, mode="r")[...], want)


def test_npy_header_is_read_only(tmp_path: Path, mount_array: Any) -> None:
    path = tmp_path / "a.zarr"
    want = _store_array(path, 3)
    mount = mount_array(path, ["rw"])
    npy = mount.path / "data.npy"
    raw = npy.read_bytes()
    header_size = len(raw) - want.nbytes
    assert header_size > 0 and header_size % 64 == 0
    header = raw[:header_size]
    with open(npy, "r+b", buffering=0) as f:
        # A changed byte in the header: refused.
        with pytest.raises(OSError) as changed:
            os.pwrite(f.fileno(), b"\x94", 0)
        assert changed.value.errno == errno.EPERM
        with pytest.raises(OSError) as shape_changed:
            os.pwrite(f.fileno(), header.replace(b"(20, 30)", b"(30, 20)"), 0)
        assert shape_changed.value.errno == errno.EPERM
        # The same bytes again (what a flushed map writes): accepted, and the data behind it too.
        assert os.pwrite(f.fileno(), header, 0) == header_size
        body = np.array([41, 42, 43], dtype="<i4").tobytes()
        assert os.pwrite(f.fileno(), header[-8:] + body, header_size - 8) == 8 + len(body)
        # The size is the array's: no truncating, no growing.
        with pytest.raises(OSError) as truncated:
            os.ftruncate(f.fileno(), header_size)
        assert truncated.value.errno == errno.EPERM
        with pytest.raises(OSError) as grown:
            os.pwrite(f.fileno(), b"\0\0\0\0", len(raw))
        assert grown.value.errno == errno.EFBIG
    assert npy.read_bytes()[:header_size] == header
    want.reshape(-1)[:3] = [41, 42, 43]
    assert mount.unmount() == 0
    assert np.array_equal(zarr.open_array(path, mode="r")[...], want)
    assert zarr.open_array(path, mode="r").shape == (20, 30)


def test_header_views_are_read_only(tmp_path: Path, mount_array: Any) -> None:
    path = tmp_path / "a.zarr"
    _store_array(path, 3)
    mount = mount_array(path, ["rw"])
    for name in ("data.raw.nhdr", "data.mhd", "data.vrt"):
        with pytest.raises(PermissionError):
            open(mount.path / name, "r+b").close()
        assert not os.access(mount.path / name, os.W_OK)


# -- headers after a resize ---------------------------------------------------------------------


@pytest.mark.parametrize("fortran", [False, True], ids=["C", "F"])
def test_headers_follow_a_resize(tmp_path: Path, mount_array: Any, fortran: bool) -> None:
    path = tmp_path / "a.zarr"
    want = _store_array(path, 3, sharded=True)
    mount = mount_array(path, ["rw", *(["order=F"] if fortran else [])])
    before = {name: (mount.path / name).read_bytes() for name in ("data.raw.nhdr", "data.mhd", "data.vrt")}
    # Keep 12 of 20 rows (C) or 18 of 30 columns (F: the last axis is data's slowest).
    new_shape = (20, 18) if fortran else (12, 30)
    os.truncate(mount.data, 4 * 20 * 18 if fortran else 4 * 12 * 30)
    cut = want[:, :18] if fortran else want[:12]
    assert np.load(mount.path / "data.npy").shape == new_shape
    assert np.array_equal(np.load(mount.path / "data.npy"), cut)
    for name, old in before.items():
        assert (mount.path / name).read_bytes() != old, name
    _assert_bit_equal(_read_nrrd(mount.path / "data.raw.nhdr", fortran)[0], cut)
    _assert_bit_equal(_read_sitk(mount.path / "data.mhd", fortran)[0], cut)
    if HAS_GDAL:
        _assert_bit_equal(_read_gdal(mount.path / "data.vrt", tmp_path, 2), cut)
    # Growing: new rows hold the fill value, the headers follow again.
    with open(mount.data, "ab") as f:
        f.write(np.full(20 if fortran else 30, 9, dtype="<i4").tobytes())
    grown = np.load(mount.path / "data.npy")
    if fortran:
        assert grown.shape == (20, 19) and np.array_equal(grown[:, :18], cut) and (grown[:, 18] == 9).all()
    else:
        assert grown.shape == (13, 30) and np.array_equal(grown[:12], cut) and (grown[12] == 9).all()
    _assert_bit_equal(_read_sitk(mount.path / "data.mhd", fortran)[0], grown)
    assert mount.unmount() == 0
    assert zarr.open_array(path, mode="r").shape == grown.shape


# -- spacings from OME-Zarr ---------------------------------------------------------------------


def test_ome_zarr_scales_become_spacings(tmp_path: Path, mount_array: Any) -> None:
    """An image written by ome-zarr (v2 group, a pyramid of levels each with its own scale)."""
    store = tmp_path / "image.ome.zarr"
    image = (np.arange(2 * 32 * 40, dtype=np.uint32) * 2654435761 % 251).astype(np.uint8).reshape(2, 32, 40)
    root = zarr.open_group(store, mode="w", zarr_format=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        write_image(image, root, axes="cyx", storage_options={"chunks": (1, 16, 16)})
    datasets = json.loads((store / ".zattrs").read_bytes())["multiscales"][0]["datasets"]
    scales = {d["path"]: [float(v) for v in d["coordinateTransformations"][0]["scale"]] for d in datasets}
    assert scales[datasets[1]["path"]] == [1.0, 2.0, 2.0]  # what ome-zarr writes: the test's premise
    mount = mount_array(store, ["ro"])
    for level, scale in scales.items():
        want = zarr.open_array(store / level, mode="r")[...]
        data, fields = _read_nrrd(mount.path / level / "data.raw.nhdr", False)
        assert np.array_equal(data, want) and fields["axis spacings"] == scale
        values, spacing = _read_sitk(mount.path / level / "data.mhd", False)
        assert np.array_equal(values, want) and spacing == scale
    level = datasets[1]["path"]
    fortran = mount_array(store, ["ro", "order=F"])
    values, spacing = _read_sitk(fortran.path / level / "data.raw.nhdr", True)
    assert spacing == scales[level]
    assert np.array_equal(values, zarr.open_array(store / level, mode="r")[...])


def test_ome_zarr_v05_scales_by_hand(tmp_path: Path, mount_array: Any) -> None:
    """OME-Zarr 0.5 (Zarr v3: multiscales under the `ome` attribute), written by hand, with a
    second level that has its own scale."""
    store = tmp_path / "image.zarr"
    root = zarr.open_group(store, mode="w", zarr_format=3)
    levels = {"0": (np.arange(6 * 8, dtype="<u2").reshape(6, 8), [2.0, 0.75]),
              "1": (np.arange(3 * 4, dtype="<u2").reshape(3, 4), [4.0, 1.5])}
    for name, (values, _) in levels.items():
        root.create_array(name, shape=values.shape, dtype=values.dtype, chunks=(4, 4))[...] = values
    root.create_array("labels_like", shape=(6, 8), dtype="<u2", chunks=(4, 4))  # not a level
    root.attrs["ome"] = {"version": "0.5", "multiscales": [{
        "axes": [{"name": "y", "type": "space"}, {"name": "x", "type": "space"}],
        "datasets": [{"path": name, "coordinateTransformations": [{"type": "scale", "scale": scale}]}
                     for name, (_, scale) in levels.items()]}]}
    mount = mount_array(store, ["ro"])
    for name, (values, scale) in levels.items():
        data, fields = _read_nrrd(mount.path / name / "data.raw.nhdr", False)
        assert np.array_equal(data, values) and fields["axis spacings"] == scale
        assert _read_sitk(mount.path / name / "data.mhd", False)[1] == scale
    assert "spacings" not in _read_nrrd(mount.path / "labels_like" / "data.raw.nhdr", False)[1]
    assert _read_sitk(mount.path / "labels_like" / "data.mhd", False)[1] == [1.0, 1.0]


@pytest.mark.parametrize("scale", [[2.0], [0.0, 1.0], [1.0, "x"], [float("nan"), 1.0]], ids=str)
def test_ome_scales_that_do_not_fit_are_ignored(tmp_path: Path, mount_array: Any, scale: list[Any]) -> None:
    """A multiscales scale of the wrong length or with a non-positive value describes no
    spacing: the level is still listed and its views still open (without spacings)."""
    store = tmp_path / "image.zarr"
    root = zarr.open_group(store, mode="w", zarr_format=2)
    values = np.arange(6 * 8, dtype="<u2").reshape(6, 8)
    root.create_array("0", shape=values.shape, dtype=values.dtype, chunks=(4, 4))[...] = values
    root.attrs["multiscales"] = [{"version": "0.4", "axes": [{"name": "y"}, {"name": "x"}],
                                  "datasets": [{"path": "0", "coordinateTransformations": [
                                      {"type": "scale", "scale": scale}]}]}]
    mount = mount_array(store, ["ro"])
    assert _views_in(mount.path / "0") == ALL_VIEWS | TIFF | H5 | NII | MRC | FITS
    data, fields = _read_nrrd(mount.path / "0" / "data.raw.nhdr", False)
    assert np.array_equal(data, values) and "spacings" not in fields
    image, spacing = _read_sitk(mount.path / "0" / "data.mhd", False)
    assert np.array_equal(image, values) and spacing == [1.0, 1.0]
