"""The header of `data.nii` without a mount: followed by an array's bytes (as the mount lays
them out: C or Fortran order, either byte order) it is written to a file and opened by nibabel,
against the array and the placement it was made from; NIfTI-Zarr's stored headers (written
by nibabel: NIfTI-1 and -2, either byte order, with an extension) made a level's; the qform's
quaternion against nibabel's; what NIfTI cannot hold refused, saying why.

The file on a real mount, read by nibabel, SimpleITK and MRtrix3: test_nifti_view.py and
test_nifti_zarr.py. data.mrc's header: test_mrc_header.py."""

from __future__ import annotations

import io
import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

import nibabel as nib
import numpy as np
import pytest

from zarrfs.views.files import CannotHold
from zarrfs.views.nifti import nifti_header
from zarrfs.views.nifti.qform import Qform, affine_of, qform_of
from zarrfs.views.nifti.stored import NIFTI_HEADER_ARRAY
from zarrfs.views.placement import NOWHERE, Axis, Placement, Surroundings

pytestmark = pytest.mark.fast

MICRONS = tuple(Axis(name, "space", "micrometer") for name in "zyx")


def _values(dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    count = int(np.prod(shape))
    if np.dtype(dtype).kind == "c":
        return (np.arange(count) + 1j * np.arange(count)[::-1]).astype(dtype).reshape(shape)
    return (np.arange(count) % 120 - 7).astype(dtype).reshape(shape)


def _nifti_file(tmp_path: Path, values: np.ndarray, fortran: bool = False,
                placement: Placement = NOWHERE) -> Any:
    """nibabel's image of data.nii as the mount makes it of `values` (in their byte order)."""
    header = nifti_header(values.dtype, values.shape, fortran, lambda: placement)
    path = tmp_path / f"data-{len(list(tmp_path.iterdir()))}.nii"
    path.write_bytes(header + values.tobytes(order="F" if fortran else "C"))
    return nib.load(path)


# -- NIfTI ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("fortran", [False, True], ids=["C", "F"])
@pytest.mark.parametrize(("dtype", "shape"), [
    ("<u1", (7,)), (">i2", (3, 5)), ("<i4", (2, 3, 4)), (">f4", (2, 3, 4, 5)), ("<f8", (2, 1, 3, 2, 2)),
    ("<c8", (3, 4)), (">c16", (2, 3)), ("|i1", (4, 4)), (">u2", (3, 2, 2)), ("<u4", (5, 2)),
    ("<i8", (2, 2, 2)), (">u8", (3, 3)), ("<i2", (1, 1, 1, 1, 1, 1, 2))])
def test_nibabel_reads_the_values(tmp_path: Path, dtype: str, shape: tuple[int, ...], fortran: bool) -> None:
    values = _values(dtype, shape)
    image = _nifti_file(tmp_path, values, fortran)
    got = np.asarray(image.dataobj)
    assert got.dtype == values.dtype  # (byte order included: the header's)
    assert np.array_equal(got, values if fortran else values.T)
    assert image.header.get_zooms() == (1.0,) * len(shape)
    assert (int(image.header["qform_code"]), int(image.header["sform_code"])) == (0, 0)
    assert image.dataobj.offset == 352 and (image.dataobj.slope, image.dataobj.inter) == (1.0, 0.0)


def test_bool_as_uint8_and_rgb(tmp_path: Path) -> None:
    flags = np.array([[True, False, True], [False, False, True]])
    image = _nifti_file(tmp_path, flags)
    assert np.asarray(image.dataobj).dtype == np.uint8 and np.array_equal(image.dataobj, flags.T)
    rgb = np.zeros((2, 3), dtype=[("r", "u1"), ("g", "u1"), ("b", "u1")])
    rgb["r"], rgb["g"], rgb["b"] = [[1, 2, 3], [4, 5, 6]], 7, 9
    image = _nifti_file(tmp_path, rgb)
    assert int(image.header["datatype"]) == 128 and np.asarray(image.dataobj).tobytes() == rgb.T.tobytes()


def test_a_dimension_past_32767_makes_nifti2(tmp_path: Path) -> None:
    values = np.arange(2 * 40_000, dtype="<u2").reshape(2, 40_000)
    image = _nifti_file(tmp_path, values)
    assert isinstance(image, nib.Nifti2Image) and image.dataobj.offset == 544
    assert np.array_equal(image.dataobj, values.T)
    assert isinstance(_nifti_file(tmp_path, values[:, :32767]), nib.Nifti1Image)


def test_voxel_sizes_origin_and_units_from_ome(tmp_path: Path) -> None:
    """Micrometres and nanometres in one image: the header is in microns; a time axis in
    milliseconds (NIfTI's fourth) with its origin as toffset."""
    axes = (Axis("t", "time", "millisecond"), Axis("z", "space", "micrometer"),
            Axis("y", "space", "micrometer"), Axis("x", "space", "nanometer"))
    placement = Placement(spacing=(40.0, 2.0, 0.5, 250.0), origin=(1000.0, 3.0, -1.0, 500.0), axes=axes)
    values = _values("<i2", (2, 3, 4, 5))
    header = _nifti_file(tmp_path, values, placement=placement).header
    assert header.get_xyzt_units() == ("micron", "msec")
    assert header.get_zooms() == pytest.approx((0.25, 0.5, 2.0, 40.0))
    assert header["toffset"] == 1000.0
    want = np.diag([0.25, 0.5, 2.0, 1.0])
    want[:3, 3] = [0.5, -1.0, 3.0]
    for affine, code in (header.get_qform(coded=True), header.get_sform(coded=True)):
        assert code == 2 and np.allclose(affine, want)


def test_fortran_order_maps_the_axes_where_they_are(tmp_path: Path) -> None:
    """In Fortran order the file's first axis is the array's first (z): the affine sends it
    along z, so the image lies where the C-order file's does."""
    placement = Placement(spacing=(2.0, 0.5, 0.25), origin=(10.0, 20.0, 30.0), axes=MICRONS)
    values = _values("<u2", (3, 4, 5))
    c_order, fortran = (_nifti_file(tmp_path, values, f, placement) for f in (False, True))
    assert fortran.shape == (3, 4, 5) and c_order.shape == (5, 4, 3)
    assert np.allclose(fortran.affine[:3, :3], c_order.affine[:3, :3][:, ::-1])
    assert np.allclose(fortran.affine[:, 3], c_order.affine[:, 3])
    assert fortran.header.get_zooms() == (2.0, 0.5, 0.25)
    four = _nifti_file(tmp_path, _values("<u2", (2, 3, 4, 5)), True, Placement(spacing=(1.0, 2.0, 0.5, 0.25)))
    assert four.header.get_zooms() == (1.0, 2.0, 0.5, 0.25)
    assert (int(four.header["qform_code"]), int(four.header["sform_code"])) == (0, 0)  # (no spatial axes)


def test_flipped_cf_axes_and_packing(tmp_path: Path) -> None:
    """Decreasing CF coordinates (north to south) flip their axis; scale_factor and add_offset
    are NIfTI's scaling."""
    placement = Placement(spacing=(0.5, 0.25), origin=(60.0, -10.0), flipped=(True, False),
                          scale=0.01, offset=273.15)
    image = _nifti_file(tmp_path, _values("<i2", (4, 6)), placement=placement)
    assert np.allclose(image.affine, [[0.25, 0, 0, -10.0], [0, -0.5, 0, 60.0], [0, 0, 1, 0], [0, 0, 0, 1]])
    assert (image.dataobj.slope, image.dataobj.inter) == pytest.approx((0.01, 273.15))
    assert image.header.get_xyzt_units() == ("unknown", "unknown")


@pytest.mark.parametrize(("dtype", "shape", "why"), [
    ("<f2", (3, 4), "no float16"), ("<M8[s]", (3, 4), "no datetime64"), ("<i4", (), "not 0"),
    ("<i4", (1,) * 8, "not 8"), ("<i4", (3, 0), "empty"), ([("a", "<i4"), ("b", "u1")], (3,), "records"),
])
def test_what_nifti_cannot_hold_is_refused_saying_why(dtype: Any, shape: tuple[int, ...], why: str) -> None:
    with pytest.raises(CannotHold, match=why):
        nifti_header(np.dtype(dtype), shape, False, lambda: NOWHERE)


def test_qform_as_nibabel_makes_and_reads_it() -> None:
    rng = np.random.default_rng(7)
    for turn in [*(rng.standard_normal((3, 3)) for _ in range(20)), np.diag([-1.0, 1.0, -1.0]), -np.eye(3)]:
        rotation = np.linalg.qr(turn)[0]
        affine = np.eye(4)
        affine[:3, :3] = rotation * [0.7, 1.3, 2.1]
        affine[:3, 3] = rng.standard_normal(3) * 10
        header = nib.Nifti1Header()
        header.set_qform(affine)
        ours = qform_of(affine)
        assert np.allclose(ours.quatern, [float(header[f"quatern_{q}"]) for q in "bcd"], atol=1e-6)
        assert ours.qfac == float(header["pixdim"][0])
        assert np.allclose(affine_of(ours, (0.7, 1.3, 2.1)), header.get_qform(), atol=1e-5)
    assert np.allclose(affine_of(Qform((1.0, 0.0, 0.0), 1.0, (0, 0, 0)), (1, 1, 1)), np.diag([1, -1, -1, 1]))


# -- NIfTI-Zarr's stored header -------------------------------------------------------------------

OBLIQUE = np.array([[0.9, 0.1, 0.0, -10.0], [-0.1, 0.95, 0.2, 5.0], [0.05, -0.2, 1.1, 3.0], [0, 0, 0, 1]])
SHEARED = OBLIQUE + np.array([[0, 0.05, 0, 0], [0, 0, 0, 0], [0.1, 0, 0, 0], [0, 0, 0, 0]])  # (sforms shear)
FINEST = Placement(spacing=(1.1, 0.95, 0.9), origin=(0.0, 0.0, 0.0), axes=MICRONS)


def _original(version: int, order: str, extension: bool, shape: tuple[int, ...] = (8, 6, 4)) -> Any:
    """A header as nibabel writes one of int16 voxels, with what NIfTI-Zarr keeps."""
    header = (nib.Nifti1Header if version == 1 else nib.Nifti2Header)(endianness=order)
    header.set_data_shape(shape)
    header.set_data_dtype(np.int16)
    header.set_qform(OBLIQUE, 1)
    header.set_sform(SHEARED, 4)
    header["descrip"] = b"an oblique scan"
    header.set_intent("estimate", name="myintent")
    header.set_slope_inter(2.0, -3.0)
    header.set_xyzt_units("mm", "sec")
    if extension:
        header.extensions.append(nib.nifti1.Nifti1Extension("comment", b"kept as it was"))
    return header


def _stored(header: Any, finest: Placement = FINEST, level: str = "0") -> Surroundings:
    """The surroundings of the image's level `level` as nifti-zarr stores them: the header in
    the array beside it, less the extension flag when there is none, and the image's OME-Zarr
    metadata placing its finest level ("0") as `finest`."""
    stream = io.BytesIO()
    header.write_to(stream)
    contents = stream.getvalue()
    contents = contents if header.extensions else contents[:-4]
    steps = [{"type": kind, kind: list(values)}
             for kind, values in (("scale", finest.spacing), ("translation", finest.origin)) if values]
    levels = [{"path": "0", "coordinateTransformations": steps}, *([{"path": level}] if level != "0" else [])]

    def sibling(name: str, max_bytes: int) -> np.ndarray | None:
        return np.frombuffer(contents, np.uint8) if name == NIFTI_HEADER_ARRAY else None

    return Surroundings({}, (), {"multiscales": [{"datasets": levels}]}, name=level, sibling=sibling)


@pytest.mark.parametrize("mount_order", ["<", ">"])
@pytest.mark.parametrize(("version", "stored_order", "extension"), [
    (1, "<", False), (1, ">", True), (2, "<", True), (2, ">", False)])
def test_the_finest_level_carries_the_stored_header(tmp_path: Path, version: int, stored_order: str,
                                                    extension: bool, mount_order: str) -> None:
    original = _original(version, stored_order, extension)
    values = _values(f"{mount_order}i2", (4, 6, 8))
    image = _nifti_file(tmp_path, values, placement=replace(FINEST, surroundings=_stored(original)))
    header = image.header
    assert type(header) is type(original) and header.endianness == mount_order
    assert np.array_equal(image.dataobj.get_unscaled(), values.T)
    for field in ("descrip", "intent_name", "intent_code", "qform_code", "sform_code", "xyzt_units",
                  "quatern_b", "quatern_c", "quatern_d", "qoffset_x", "pixdim", "srow_x", "srow_z"):
        assert np.array_equal(header[field], original[field]), field
    assert (image.dataobj.slope, image.dataobj.inter) == (2.0, -3.0)
    assert [(e.get_code(), e.get_content()) for e in header.extensions] == \
        [(e.get_code(), e.get_content()) for e in original.extensions]


def test_a_coarser_level_is_placed_as_zarr2nii_places_it(tmp_path: Path) -> None:
    """Level 1 of an edge-aligned pyramid (nifti-zarr's): twice the finest voxel, its first
    voxel's centre half a finest voxel in; affines as zarr2nii computes them (the qform's
    composed with inv(phys0) @ phys1 of the levels' OME-Zarr scales and translations)."""
    scale0, scale1 = np.array(FINEST.spacing), np.array(FINEST.spacing) * 2
    translation1 = scale0 / 2
    level = Placement(spacing=tuple(scale1), origin=tuple(translation1), axes=MICRONS,
                      surroundings=_stored(_original(1, "<", False), level="1"))
    image = _nifti_file(tmp_path, _values("<i2", (2, 3, 4)), placement=level)
    phys0, phys1 = np.eye(4), np.eye(4)
    phys0[[0, 1, 2], [0, 1, 2]] = scale0[::-1]
    phys1[[0, 1, 2], [0, 1, 2]] = scale1[::-1]
    phys1[:3, 3] = translation1[::-1]
    to_finest = np.linalg.inv(phys0) @ phys1
    qform, qcode = image.header.get_qform(coded=True)
    sform, scode = image.header.get_sform(coded=True)
    assert (qcode, scode) == (1, 4)
    assert np.allclose(qform, _original(1, "<", False).get_qform() @ to_finest, atol=1e-5)
    assert np.allclose(sform, SHEARED @ to_finest, atol=1e-5)
    assert image.header.get_zooms() == pytest.approx(np.linalg.norm(qform[:3, :3], axis=0))
    assert image.shape == (4, 3, 2) and image.header["descrip"] == b"an oblique scan"


def test_a_singleton_time_axis_of_the_header_is_kept(tmp_path: Path) -> None:
    """nifti-zarr's --no-time: the array is (c, z, y, x), the header x, y, z, t=1, c."""
    placement = Placement(spacing=(1.0, *FINEST.spacing), origin=(0.0, 0.0, 0.0, 0.0),
                          axes=(Axis("c", "channel"), *MICRONS))
    header = _original(1, "<", False, (8, 6, 4, 1, 3))
    placement = replace(placement, surroundings=_stored(header, placement))
    image = _nifti_file(tmp_path, _values("<i2", (3, 4, 6, 8)), placement=placement)
    assert image.shape == (8, 6, 4, 1, 3) and image.header["descrip"] == b"an oblique scan"


@pytest.mark.parametrize("case", ["other shape", "t and c", "finest not placed"])
def test_a_stored_header_that_does_not_fit_gives_way(tmp_path: Path, case: str,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    """A header whose dimensions are not the level's, a level of t and c (nifti-zarr's 5-D
    arrays are t, c, z, y, x; NIfTI's x, y, z, t, c), a level that cannot be placed against
    the finest: the header is made from the placement, and the log says why."""
    caplog.set_level(logging.INFO)
    shape, header = (4, 6, 8), _original(1, "<", False)
    axes, finest, spacing = MICRONS, FINEST, FINEST.spacing
    if case == "other shape":
        shape = (4, 6, 9)
    elif case == "t and c":
        shape, header = (2, 2, 4, 6, 8), _original(1, "<", False, (8, 6, 4, 2, 2))
        axes, spacing = (Axis("t", "time"), Axis("c", "channel"), *MICRONS), (1.0, 1.0, *spacing)
        finest = Placement(spacing=spacing, axes=axes)
    else:
        finest = Placement(axes=MICRONS)
    placement = Placement(spacing=spacing, axes=axes, surroundings=_stored(header, finest))
    image = _nifti_file(tmp_path, _values("<i2", shape), placement=placement)
    assert image.header["descrip"] == b"" and image.header.get_zooms()[:3] == spacing[::-1][:3]
    assert "stored NIfTI header does not describe it" in caplog.text
