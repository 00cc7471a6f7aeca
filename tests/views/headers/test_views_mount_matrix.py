"""The header views beside `data` (`data.npy`, `data.raw.nhdr`, `data.mhd`, `data.vrt`) on a real
mount, each opened by the tool it is made for (numpy, pynrrd, SimpleITK, GDAL's gdal_translate)
and compared bit for bit with what zarr-python wrote: several element types, ranks 1-4, both
byte orders of the files (`-o endian=`), C and Fortran order (`-o order=F`); the `-o views=`
option; views left out where the format has no such element type or rank.

The header formats themselves are unit-tested in test_headers.py; here the point is the mount.
"""

from __future__ import annotations

import json
import os
import subprocess
import warnings
from pathlib import Path
from typing import Any

import h5py
import hdf5plugin  # noqa: F401  (registers the zstd filter: data.h5 passes zstd chunks through)
import numpy as np
import pytest
import tifffile
import zarr
from zarr.codecs import BytesCodec

from tests.helpers.header_views import (
    ALL_VIEWS,
    FITS,
    H5,
    HAS_GDAL,
    MRC,
    NII,
    TIFF,
    assert_bit_equal,
    read_gdal,
    read_nrrd,
    read_sitk,
    typed_values,
    views_in,
)
from tests.helpers.mounting import ZARRFS


def _numeric(array: np.ndarray) -> np.ndarray:
    """What a numeric-only tool sees: bool as uint8, datetimes as their int64 count."""
    if array.dtype.kind == "b":
        return array.view(np.uint8)
    if array.dtype.kind in "mM":
        return array.view(np.int64)
    return array


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
        values = typed_values(dtype, shape, seed)
        serializer: Any = BytesCodec(endian="big") if dtype.startswith(">") else "auto"
        array = group.create_array(name, shape=shape, dtype=values.dtype.newbyteorder("="),
                                   chunks=chunks or "auto", serializer=serializer)
        array[...] = values
        expected[name] = np.asarray(zarr.open_array(path / name, mode="r")[...])
        assert_bit_equal(expected[name], values)  # the writer's own round trip
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
        assert views_in(directory) == views - stack, name
        raw = (directory / "data").read_bytes()
        assert raw == want.astype(want.dtype.newbyteorder(">" if big else "<")).tobytes(
            order="F" if fortran else "C"), name

        loaded = np.load(directory / "data.npy", mmap_mode="r")
        assert_bit_equal(loaded, want)
        assert loaded.dtype == want.dtype.newbyteorder(">" if big else "<") or want.dtype.itemsize == 1
        if "raw.nhdr" in views:
            got, fields = read_nrrd(directory / "data.raw.nhdr", fortran)
            assert_bit_equal(got, _numeric(want))
            assert "spacings" not in fields
            if want.dtype.itemsize > 1:
                assert fields["endian"] == ("big" if big else "little")
            if len(shape) >= 2:  # SimpleITK has no 1-d images
                image, _ = read_sitk(directory / "data.raw.nhdr", fortran)
                assert_bit_equal(image, _numeric(want))
        if "mhd" in views and len(shape) >= 2:
            image, spacing = read_sitk(directory / "data.mhd", fortran)
            assert_bit_equal(image, _numeric(want))
            assert spacing == [1.0] * len(shape)
        if "vrt" in views and HAS_GDAL:
            assert_bit_equal(read_gdal(directory / "data.vrt", tmp_path, len(shape)), _numeric(want))
        if "tif" in views:  # (in the array's C order, whatever order= says of `data`)
            with tifffile.TiffFile(directory / "data.tif") as tiff:
                assert tiff.byteorder == (">" if big else "<")
                pixels = np.stack([page.asarray() for page in tiff.pages])
            assert_bit_equal(pixels.reshape(shape), _numeric(want))
        if "h5" in views:  # (in the array's C order, as data.tif)
            with h5py.File(directory / "data.h5", "r") as f:
                as_stored = want.view(np.int8) if want.dtype.kind == "b" else _numeric(want)  # (bool: bytes)
                assert_bit_equal(f["data"][...], as_stored)


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
            values = typed_values(dtype, (5, 3))
            array = group.create_array(name, shape=(5, 3), dtype=dtype, chunks=(2, 2))
            array[...] = values
            expected[name] = values
        record = np.dtype([("a", "<i4"), ("b", "S2")])
        rec = np.zeros((4,), dtype=record)
        rec["a"], rec["b"] = [1, -2, 3, 4], [b"x", b"yz", b"", b"q"]
        group.create_array("rec", shape=(4,), dtype=record, chunks=(3,), fill_value=None)[...] = rec
    mount = mount_array(path, ["ro"])
    for name, (_, views) in cases.items():
        assert views_in(mount.path / name) == views, name
        assert_bit_equal(np.load(mount.path / name / "data.npy", mmap_mode="r"), expected[name])
    assert views_in(mount.path / "rec") == {"npy"}
    loaded = np.load(mount.path / "rec" / "data.npy")
    assert loaded.dtype == record and loaded.tobytes() == rec.tobytes()
    if HAS_GDAL:
        assert_bit_equal(read_gdal(mount.path / "c16" / "data.vrt", tmp_path, 2), expected["c16"])
