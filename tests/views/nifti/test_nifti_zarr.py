"""`data.nii` of NIfTI-Zarr images (neuroscales' layout) written by `nifti-zarr` from NIfTI
files nibabel made with oblique affines: the finest level's header is the original's (affine,
qform and sform codes, description, intent, scaling, units, extensions), as nibabel, SimpleITK
and MRtrix3 read the original; every other level's is what nifti-zarr's own `zarr2nii` makes
of it; the voxels are the original's and the levels' as zarr-python reads them. NIfTI-1 and
NIfTI-2 originals, little- and big-endian, 3-D and 4-D; Zarr v3 (OME-Zarr 0.5, a sharded one)
and v2 (0.4); C and Fortran order; one image in S3 (moto).

The header alone: test_nifti_header.py."""

from __future__ import annotations

import shutil
import subprocess
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fsspec
import nibabel as nib
import numpy as np
import pytest
import SimpleITK as sitk
import zarr

from tests.helpers.s3_server import S3Server, free_port, serving

niizarr = pytest.importorskip("niizarr")

MRTRIX = shutil.which("mrinfo") is not None
ROTATION = np.array([[0.9, -0.3, 0.3], [0.35, 0.93, -0.1], [-0.25, 0.2, 0.95]])  # (nearly a rotation)
# (name: nibabel's image class, voxel type, shape x, y, z (, t), byte order, nii2zarr's options)
ORIGINALS: dict[str, tuple[type, str, tuple[int, ...], str, dict[str, Any]]] = {
    "oblique": (nib.Nifti1Image, "int16", (40, 30, 20), "<", {"zarr_version": 3}),
    "nifti2_big": (nib.Nifti2Image, "float32", (24, 20, 16), ">", {"zarr_version": 2}),
    "series": (nib.Nifti1Image, "uint16", (32, 24, 16, 3), "<", {"zarr_version": 3, "shard": 32}),
}


def _affine(seed: int, flip: bool) -> np.ndarray:
    """An oblique affine (a rotation, voxel sizes, an offset; the third axis flipped)."""
    rotation = np.linalg.qr(ROTATION + seed * 0.1)[0]
    affine = np.eye(4)
    affine[:3, :3] = rotation @ np.diag([0.9, 1.2, -2.5 if flip else 2.5])
    affine[:3, 3] = [-30.0 + seed, 12.5, 7.25]
    return affine


def _original(path: Path, seed: int, image_class: type, dtype: str, shape: tuple[int, ...],
              order: str) -> Any:
    values = (np.arange(int(np.prod(shape))) * 7919 % 1000).astype(dtype).reshape(shape, order="F")
    header = image_class.header_class(endianness=order)
    header.set_data_dtype(dtype)
    header.set_qform(_affine(seed, seed % 2 == 1), 1)
    header.set_sform(_affine(seed, seed % 2 == 1) + np.array([[0, 0.05, 0, 0], [0.02, 0, 0, 0],
                                                              [0, 0, 0, 0], [0, 0, 0, 0]]), 4)
    header["descrip"] = f"original {seed}".encode()
    header.set_intent("estimate", name="thickness")
    header.set_slope_inter(0.5, -10.0)
    header.set_xyzt_units("mm", "msec")
    header["cal_min"], header["cal_max"] = -10.0, 490.0
    header["toffset"] = 125.0
    if seed == 1:
        header.extensions.append(nib.nifti1.Nifti1Extension("comment", b"kept through the levels"))
    header.set_data_shape(shape)
    with open(path, "wb") as f:  # (as it is: nib.save would make its own scaling and codes)
        header.write_to(f)
        f.write(values.astype(header.get_data_dtype()).tobytes(order="F"))
    return nib.load(path, mmap=False)


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Path]]:
    """The originals (NAME.nii), and NIfTI-Zarr images made of them by nii2zarr (NAME.nii.zarr)."""
    work = tmp_path_factory.mktemp("niftizarr")
    group = work / "images"
    originals = {}
    for seed, (name, (image_class, dtype, shape, order, options)) in enumerate(ORIGINALS.items()):
        originals[name] = work / f"{name}.nii"
        _original(originals[name], seed, image_class, dtype, shape, order)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (nii2zarr: OME 0.4 on Zarr v2 and friends)
            niizarr.nii2zarr(str(originals[name]), str(group / f"{name}.nii.zarr"), chunk=16, **options)
    return group, originals


def _load(path: Path) -> Any:
    return nib.load(path, mmap=False)  # (no map: one left open would keep the mount busy)


def _levels(image: Path) -> list[str]:
    return [str(d["path"]) for d in zarr.open_group(image, mode="r").metadata.attributes.get(
        "ome", zarr.open_group(image, mode="r").metadata.attributes)["multiscales"][0]["datasets"]]


def _assert_placed_as(got: Any, want: Any, columns: list[int] | None = None) -> None:
    """Both affines and their codes the same (the columns of `want`'s taken in that order)."""
    for coded in ("get_qform", "get_sform"):
        (got_affine, got_code), (want_affine, want_code) = (getattr(h, coded)(coded=True)
                                                            for h in (got.header, want.header))
        want_affine = want_affine if columns is None else want_affine[:, columns]
        assert got_code == want_code and np.allclose(got_affine, want_affine, atol=1e-4), coded


def _assert_same_header(got: Any, want: Any) -> None:
    """What NIfTI-Zarr keeps of the original, as nibabel reads both."""
    _assert_placed_as(got, want)
    for field in ("descrip", "intent_code", "intent_name", "xyzt_units", "cal_min", "cal_max", "toffset",
                  "dim", "pixdim"):
        assert np.array_equal(got.header[field], want.header[field]), field
    assert (got.dataobj.slope, got.dataobj.inter) == (want.dataobj.slope, want.dataobj.inter)
    assert [e.get_content() for e in got.header.extensions] == \
        [e.get_content() for e in want.header.extensions]


def _mrinfo(path: Path, what: str) -> str:
    result = subprocess.run(["mrinfo", "-config", "RealignTransform", "false", what, str(path)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize("name", sorted(ORIGINALS))
def test_the_finest_level_is_the_original(images: tuple[Path, dict[str, Path]], mount_array: Any,
                                          name: str) -> None:
    group, originals = images
    nii = mount_array(group / f"{name}.nii.zarr", ["ro"]).path / "0" / "data.nii"
    original, level = _load(originals[name]), _load(nii)
    _assert_same_header(level, original)
    assert type(level) is type(original)
    assert np.array_equal(level.dataobj.get_unscaled(), original.dataobj.get_unscaled())
    assert np.array_equal(level.get_fdata(), original.get_fdata())
    if MRTRIX:
        for what in ("-transform", "-spacing", "-size"):
            assert _mrinfo(nii, what) == _mrinfo(originals[name], what), what
        # (the type as the original's, in the mount's byte order)
        assert _mrinfo(nii, "-datatype") == _mrinfo(originals[name], "-datatype")[:-3] + "LE\n"
    if ORIGINALS[name][0] is nib.Nifti1Image:  # (SimpleITK 2.5 reads no NIfTI-2)
        ours, theirs = (sitk.ReadImage(str(p)) for p in (nii, originals[name]))
        for attribute in ("GetSpacing", "GetOrigin", "GetDirection", "GetSize"):
            assert getattr(ours, attribute)() == pytest.approx(getattr(theirs, attribute)()), attribute
        assert np.array_equal(sitk.GetArrayFromImage(ours), sitk.GetArrayFromImage(theirs))


@pytest.mark.parametrize("name", sorted(ORIGINALS))
def test_coarser_levels_are_placed_as_zarr2nii_places_them(images: tuple[Path, dict[str, Path]],
                                                           mount_array: Any, name: str) -> None:
    group, _ = images
    image = group / f"{name}.nii.zarr"
    levels = _levels(image)
    assert len(levels) >= 2  # (the test's premise: nii2zarr made a pyramid)
    mount = mount_array(image, ["ro"])
    for index, level in enumerate(levels[1:], start=1):
        ours = _load(mount.path / level / "data.nii")
        theirs = niizarr.zarr2nii(str(image), level=index)
        _assert_placed_as(ours, theirs)
        assert ours.header.get_zooms() == pytest.approx(theirs.header.get_zooms(), rel=1e-5)
        assert ours.header["descrip"] == theirs.header["descrip"]
        values = np.asarray(zarr.open_array(image / level, mode="r")[...]).T
        assert ours.shape == values.shape and np.array_equal(ours.dataobj.get_unscaled(), values)
        if MRTRIX:
            assert _mrinfo(mount.path / level / "data.nii", "-size").split() == [str(n) for n in values.shape]


def test_fortran_order_keeps_the_image_where_it_is(images: tuple[Path, dict[str, Path]],
                                                   mount_array: Any) -> None:
    """In Fortran order data.nii's first axis is the array's first (z): the stored affines'
    columns follow their axes, so every voxel stays where the original puts it."""
    group, originals = images
    mount = mount_array(group / "oblique.nii.zarr", ["ro", "order=F", "endian=big"])
    original = _load(originals["oblique"])
    level = _load(mount.path / "0" / "data.nii")
    assert level.shape == original.shape[::-1] and level.header.endianness == ">"
    assert np.array_equal(level.dataobj.get_unscaled(), np.asarray(original.dataobj.get_unscaled()).T)
    _assert_placed_as(level, original, [2, 1, 0, 3])
    assert level.header["descrip"] == original.header["descrip"]


@pytest.fixture
def s3_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[S3Server]:
    pytest.importorskip("moto.server")
    yield from serving(S3Server(free_port()), monkeypatch)


def test_an_image_in_s3(images: tuple[Path, dict[str, Path]], s3_server: S3Server, mount_array: Any) -> None:
    """The `nifti` array and the levels read from S3: the same headers and voxels."""
    group, originals = images
    s3 = fsspec.filesystem("s3", **s3_server.uploading_options())
    s3.put(str(group / "oblique.nii.zarr"), f"{s3_server.bucket}/oblique.nii.zarr", recursive=True)
    mount = mount_array(f"s3://{s3_server.bucket}/oblique.nii.zarr",
                        ["ro", f"endpoint_url={s3_server.endpoint_url}"])
    level = _load(mount.path / "0" / "data.nii")
    _assert_same_header(level, _load(originals["oblique"]))
    assert np.array_equal(level.dataobj.get_unscaled(), _load(originals["oblique"]).dataobj.get_unscaled())
    theirs = niizarr.zarr2nii(str(group / "oblique.nii.zarr"), level=1)
    _assert_placed_as(_load(mount.path / "1" / "data.nii"), theirs)
