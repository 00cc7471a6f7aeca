"""`data.nii` on a real mount, opened by nibabel, SimpleITK and MRtrix3 (`mrinfo`, and
`mrconvert` to a NIfTI of its own that nibabel reads back), against zarr-python's values:
element types, ranks 1-5, codecs (zstd, blosc, sharded, big-endian chunks), both byte orders
of the mount (`-o endian=`: the header states it) and both orders (`-o order=F`); OME-Zarr
0.4 and 0.5 images written by ome-zarr-py (voxel sizes, origins, units, a time axis); NIfTI-2
past NIfTI-1's dimensions; writes through a map of the file; what NIfTI or MRC cannot hold
has no data.nii or data.mrc, and the log says why.

The header alone: test_nifti_header.py. NIfTI-Zarr images: test_nifti_zarr.py."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import warnings
from pathlib import Path
from typing import Any

import nibabel as nib
import numpy as np
import pytest
import SimpleITK as sitk
import zarr
from ome_zarr.format import FormatV04, FormatV05
from ome_zarr.writer import write_image

from tests.helpers.mounting import Mount
from tests.helpers.view_arrays import Arrays, random_values, write_group

MRTRIX = shutil.which("mrconvert") is not None
needs_mrtrix = pytest.mark.skipif(not MRTRIX, reason="needs MRtrix3 (Debian's mrtrix3: scripts/install)")

# name: (dtype as stored, shape, chunks, shards, compressor)
ARRAYS: Arrays = {
    "u1": ("|u1", (7, 9), (4, 4), None, "zstd"),
    "i2_blosc": ("<i2", (3, 5, 6), (2, 2, 4), None, "blosc"),
    "u2_big": (">u2", (6, 11), (4, 5), None, "zstd"),
    "f4_sharded": ("<f4", (2, 3, 4, 5), (1, 1, 2, 5), (2, 3, 4, 5), "zstd"),
    "f8_big_sharded": (">f8", (4, 3, 5), (2, 3, 5), (4, 3, 5), "blosc"),
    "i8": ("<i8", (3, 4, 2), (2, 2, 2), None, "zstd"),
    "c8": ("<c8", (4, 6), (3, 3), None, "zstd"),
    "bool": ("|b1", (5, 4, 3), (2, 2, 2), None, "zstd"),  # (as uint8)
    "rank1": ("<u2", (13,), (5,), None, "zstd"),
    "rank5": ("<i4", (2, 1, 3, 2, 2), (1, 1, 2, 2, 2), None, "blosc"),
}
MRTRIX_TYPES = {"u1": "UInt8", "i2": "Int16", "u2": "UInt16", "f4": "Float32", "f8": "Float64", "i8": "Int64",
                "c8": "CFloat32", "b1": "UInt8", "i4": "Int32"}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, np.ndarray]]:
    """One v3 group of every array of ARRAYS, and what zarr-python reads of each."""
    path = tmp_path_factory.mktemp("nifti") / "arrays.zarr"
    return path, write_group(path, ARRAYS)


def _as_file(values: np.ndarray, fortran: bool) -> np.ndarray:
    """The array as a NIfTI reader indexes data.nii: x (the file's fastest axis) first."""
    numbers = values.view(np.uint8) if values.dtype == bool else values
    return numbers if fortran else numbers.T


def _mrtrix_values(path: Path, work: Path) -> np.ndarray:
    """What MRtrix3 reads of `path`, written by its mrconvert to a NIfTI of x-fastest strides."""
    out = work / f"mrtrix-{len(list(work.glob('mrtrix-*')))}.nii"
    rank = int(_mrinfo(path, "-ndim"))
    strides = ",".join(str(axis + 1) for axis in range(rank))
    result = subprocess.run(["mrconvert", "-quiet", str(path), "-strides", strides, str(out)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return np.asarray(_load(out).dataobj)


def _load(path: Path) -> Any:
    """nibabel's image, read without a map (a map left open would keep the mount busy)."""
    return nib.load(path, mmap=False)


def _mrinfo(path: Path, *what: str) -> str:
    result = subprocess.run(["mrinfo", "-config", "RealignTransform", "false", *what, str(path)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def _sitk_values(path: Path) -> np.ndarray:
    """SimpleITK's array, axes reversed back to the file's (x first)."""
    return sitk.GetArrayFromImage(sitk.ReadImage(str(path))).T


@needs_mrtrix
@pytest.mark.parametrize("options", [(), ("endian=big",), ("order=F",), ("order=F", "endian=big")],
                         ids=["C-little", "C-big", "F-little", "F-big"])
def test_every_reader_reads_the_array(store: tuple[Path, dict[str, np.ndarray]], mount_array: Any,
                                      tmp_path: Path, options: tuple[str, ...]) -> None:
    path, expected = store
    fortran, big = "order=F" in options, "endian=big" in options
    mount: Mount = mount_array(path, ["ro", *options])
    for name, (dtype, shape, *_) in ARRAYS.items():
        nii = mount.path / name / "data.nii"
        want = _as_file(expected[name], fortran)
        image = _load(nii)
        got = np.asarray(image.dataobj)
        assert got.shape == want.shape and np.array_equal(got, want), name
        if want.dtype.itemsize > 1:
            assert image.header.endianness == (">" if big else "<"), name
            assert _mrinfo(nii, "-datatype").endswith("BE" if big else "LE"), name
        assert _mrinfo(nii, "-datatype").removesuffix("BE").removesuffix("LE") == MRTRIX_TYPES[dtype[1:]]
        assert np.array_equal(_mrtrix_values(nii, tmp_path).reshape(want.shape), want), name
        if len(shape) >= 2:  # (SimpleITK has no 1-D images)
            assert np.array_equal(_sitk_values(nii).reshape(want.shape), want), name
        assert image.header.get_zooms() == (1.0,) * len(shape)


@pytest.fixture(scope="module", params=["0.4", "0.5"])
def ome_image(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An OME-Zarr image by ome-zarr-py (0.4: Zarr v2; 0.5: v3) of two levels, z and y in
    micrometres, x in nanometres; a second image of t (milliseconds), z, y, x."""
    path = tmp_path_factory.mktemp("ome") / "image.ome.zarr"
    fmt, zarr_format = (FormatV04(), 2) if request.param == "0.4" else (FormatV05(), 3)
    root = zarr.open_group(path, mode="w", zarr_format=zarr_format)
    volume = (np.arange(3 * 16 * 24) % 251).astype(np.uint16).reshape(3, 16, 24)
    units = {"z": "micrometer", "y": "micrometer", "x": "nanometer", "t": "millisecond"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        write_image(volume, root.create_group("volume"), fmt=fmt, axes="zyx", scale_factors=[2],
                    scale={"z": 2.0, "y": 0.5, "x": 250.0}, axes_units=units,
                    storage_options={"chunks": (1, 8, 8)})
        series = (np.arange(2 * 3 * 4 * 5) % 97).astype(np.float32).reshape(2, 3, 4, 5)
        write_image(series, root.create_group("series"), fmt=fmt, axes="tzyx", scale_factors=[],
                    scale={"t": 40.0, "z": 2.0, "y": 1.0, "x": 1.0}, axes_units=units)
    return path


@needs_mrtrix
def test_ome_zarr_voxel_sizes_origins_and_units(ome_image: Path, mount_array: Any) -> None:
    """Micrometres and nanometres: the header is in microns, x's 250 nm as 0.25; level s1's
    translation (ome-zarr-py's half-voxel shift) is its origin. SimpleITK reads it in mm and
    LPS (x and y negated), MRtrix3 as stated."""
    mount: Mount = mount_array(ome_image, ["ro"])
    for level, zooms, origin in (("s0", (0.25, 0.5, 2.0), (0.0, 0.0, 0.0)),
                                 ("s1", (0.5, 1.0, 2.0), (0.125, 0.25, 0.0))):
        nii = mount.path / "volume" / level / "data.nii"
        image = _load(nii)
        want = np.asarray(zarr.open_array(ome_image / "volume" / level, mode="r")[...]).T
        assert np.array_equal(image.dataobj, want)
        assert image.header.get_zooms() == zooms and image.header.get_xyzt_units() == ("micron", "unknown")
        affine = np.diag([*zooms, 1.0])
        affine[:3, 3] = origin
        assert np.allclose(image.affine, affine) and image.header.get_qform(coded=True)[1] == 2
        itk = sitk.ReadImage(str(nii))
        assert itk.GetSpacing() == pytest.approx([z / 1000 for z in zooms])  # type: ignore[no-untyped-call]
        assert itk.GetOrigin() == pytest.approx((-origin[0] / 1000, -origin[1] / 1000, origin[2] / 1000))
        assert [float(v) for v in _mrinfo(nii, "-spacing").split()] == list(zooms)
        rows = _mrinfo(nii, "-transform").splitlines()
        transform = np.array([[float(v) for v in row.split()] for row in rows])
        # (MRtrix3's transform: the axes' directions, their sizes apart)
        assert np.allclose(transform[:3, :3], np.eye(3)) and np.allclose(transform[:3, 3], origin)
        assert np.array_equal(sitk.GetArrayFromImage(itk), want.T)
    series = _load(mount.path / "series" / "s0" / "data.nii")
    assert series.shape == (5, 4, 3, 2) and series.header.get_xyzt_units() == ("micron", "msec")
    assert series.header.get_zooms() == pytest.approx((0.001, 1.0, 2.0, 40.0))  # (x: 1 nm)
    assert np.array_equal(series.dataobj, np.asarray(zarr.open_array(ome_image / "series" / "s0")[...]).T)


@needs_mrtrix
def test_a_dimension_past_nifti1s_makes_nifti2(tmp_path: Path, mount_array: Any) -> None:
    """NIfTI-1 counts in 16 bits: 40,000 columns make data.nii NIfTI-2, which nibabel and
    MRtrix3 read (SimpleITK 2.5 reads no NIfTI-2)."""
    values = (np.arange(3 * 40_000) % 241).astype(np.uint8).reshape(3, 40_000)
    zarr.create_array(tmp_path / "wide.zarr", shape=values.shape, chunks=(2, 8192), dtype="u1")[...] = values
    mount: Mount = mount_array(tmp_path / "wide.zarr", ["ro"])
    image = _load(mount.path / "data.nii")
    assert isinstance(image, nib.Nifti2Image) and np.array_equal(image.dataobj, values.T)
    assert _mrinfo(mount.path / "data.nii", "-format") == "NIfTI-2"
    through_mrtrix = _mrtrix_values(mount.path / "data.nii", tmp_path)
    assert np.array_equal(through_mrtrix.reshape(values.T.shape), values.T)


@pytest.mark.parametrize("options", [(), ("order=F", "endian=big")], ids=["C-little", "F-big"])
def test_writes_through_a_map_of_data_nii_reach_the_store(tmp_path: Path, mount_array: Any,
                                                           options: tuple[str, ...]) -> None:
    """A map of the voxels at vox_offset, written and flushed (header pages included, as they
    were): the store has the new values; a changed header byte is refused (EPERM)."""
    path = tmp_path / "a.zarr"
    values = random_values("<i2", (6, 8, 10), 3)
    zarr.create_array(path, shape=values.shape, chunks=(4, 4, 4), dtype="<i2", shards=(4, 8, 8))[...] = values
    mount: Mount = mount_array(path, ["rw", *options])
    nii = mount.path / "data.nii"
    image = _load(nii)
    voxels = np.memmap(nii, dtype=image.get_data_dtype(), mode="r+", offset=image.dataobj.offset,
                       shape=image.shape, order="F")
    view = voxels if "order=F" in options else voxels.T  # (in the array's own axis order)
    view[1, 2, 3] = -1234
    view[5, :, 9] = 77
    voxels.flush()
    del voxels, view
    values[1, 2, 3], values[5, :, 9] = -1234, 77
    with open(nii, "r+b", buffering=0) as f:
        with pytest.raises(OSError) as refused:
            os.pwrite(f.fileno(), b"\x01", 0)
        assert refused.value.errno == errno.EPERM
    assert mount.unmount() == 0
    assert np.array_equal(zarr.open_array(path, mode="r")[...], values)


# (array: shape, dtype, what the log says of data.nii and of data.mrc when the array has none)
LEFT_OUT: dict[str, tuple[tuple[int, ...], str, dict[str, str]]] = {
    "half": ((3, 4), "<f2", {"data.nii": "NIfTI has no float16 elements"}),  # (MRC's mode 12)
    "scalar": ((), "<i4", {"data.nii": "NIfTI holds 1 to 7 dimensions, not 0",
                           "data.mrc": "MRC has no mode for int32 elements"}),
    "times": ((4,), "<M8[s]", {"data.nii": "NIfTI has no datetime64[s] elements",
                               "data.mrc": "MRC has no mode for datetime64[s] elements"}),
    "bytes": ((3, 4), "u1", {"data.mrc": "MRC has no mode for uint8 elements"}),
    "line": ((7,), "<i2", {"data.mrc": "MRC holds images, volumes and their stacks (2 to 4 dimensions), "
                                       "not 1"}),
    "image": ((3, 4), "<i2", {}),
}


def test_what_a_format_cannot_hold_has_no_file_and_the_log_says_why(tmp_path: Path, mount_array: Any) -> None:
    group = zarr.open_group(tmp_path / "g.zarr", mode="w", zarr_format=3)
    for name, (shape, dtype, _) in LEFT_OUT.items():
        group.create_array(name, shape=shape, dtype=dtype)
    mount: Mount = mount_array(tmp_path / "g.zarr", ["ro", "views=nii:mrc"])
    for name, (_, _, absent) in LEFT_OUT.items():
        shown = {"data.nii", "data.mrc"} - set(absent)
        assert sorted(os.listdir(mount.path / name)) == sorted({"chunks", "data", "zarr.json", *shown}), name
        for file_name, why in absent.items():
            mount.wait_for_log(f"array {name} has no {file_name}: {why}")
