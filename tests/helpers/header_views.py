"""What the tests of the header views on a real mount (tests/views/headers/test_views_mount_*.py)
share: the views an array directory may show, values of each element type, and each view read
by the tool it is made for (pynrrd, SimpleITK, GDAL's gdal_translate)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import hdf5plugin  # noqa: F401  (registers the zstd filter: data.h5 passes zstd chunks through)
import nrrd
import numpy as np
import SimpleITK as sitk
import zarr

from tests.helpers.mounting import VIEW_FILES

HAS_GDAL = shutil.which("gdal_translate") is not None
ALL_VIEWS = {"npy", "raw.nhdr", "mhd", "vrt"}
TIFF = {"tif"}  # (data.tif: rank 2 and more, numbers TIFF holds)
H5 = {"h5"}  # (data.h5: rank 1 and more, ints and floats)
NII = {"nii"}  # (data.nii: rank 1 to 7, numbers but float16: tests/views/nifti/test_nifti_view.py)
MRC = {"mrc"}  # (data.mrc: rank 2 to 4 of MRC2014's modes: tests/views/mrc/test_mrc_view.py)
# (data.fits: rank 1 to 999, integers and 32- and 64-bit floats: tests/views/fits/test_fits_view.py)
FITS = {"fits"}


# -- helpers ------------------------------------------------------------------------------------


def typed_values(dtype: str, shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
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


def assert_bit_equal(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape
    assert (got.dtype.kind, got.dtype.itemsize) == (want.dtype.kind, want.dtype.itemsize)
    little = (got.dtype.newbyteorder("<"), want.dtype.newbyteorder("<"))
    assert np.ascontiguousarray(got).astype(little[0]).tobytes() == \
        np.ascontiguousarray(want).astype(little[1]).tobytes()


def read_nrrd(path: Path, fortran: bool) -> tuple[np.ndarray, dict[str, Any]]:
    """The data in the array's own axis order (pynrrd's index_order="C" reverses the header's
    fastest-first axes); fields as read, plus `axis spacings` in the array's axis order."""
    data, fields = nrrd.read(str(path), index_order="F" if fortran else "C")
    if "spacings" in fields or "space directions" in fields:  # (directions: placed with an origin)
        given = fields.get("spacings")
        given = np.linalg.norm(fields["space directions"], axis=1) if given is None else given
        spacings = [float(v) for v in given]
        fields["axis spacings"] = spacings if fortran else spacings[::-1]
    return data, fields


def read_sitk(path: Path, fortran: bool) -> tuple[np.ndarray, list[float]]:
    """The image as an array in the array's own axis order, and the spacings likewise."""
    image = sitk.ReadImage(str(path))
    values = sitk.GetArrayFromImage(image)  # C order over the header's axes (fastest last)
    spacing = list(image.GetSpacing())  # type: ignore[no-untyped-call]  # fastest first
    if fortran:
        return values.T, spacing
    return values, spacing[::-1]


def read_gdal(vrt: Path, work: Path, rank: int) -> np.ndarray:
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


def views_in(directory: Path) -> set[str]:
    return {name.removeprefix("data.") for name in os.listdir(directory) if name in VIEW_FILES}
