"""The header of `data.mrc` without a mount: followed by an array's bytes (as the mount lays
them out: C or Fortran order, either byte order) it is written to a file that mrcfile opens
and its MRC2014 validator passes, against the array and the placement it was made from:
every mode, images, volumes and their stacks, voxel sizes and origins in ångström from
OME-Zarr's units; what MRC cannot hold refused, saying why.

The file on a real mount: test_mrc_view.py."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

import mrcfile
import numpy as np
import pytest

from zarrfs.views.files import CannotHold
from zarrfs.views.mrc import mrc_header
from zarrfs.views.placement import NOWHERE, Axis, Placement

pytestmark = pytest.mark.fast


def _values(dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    count = int(np.prod(shape))
    if np.dtype(dtype).kind == "c":
        return (np.arange(count) - 1j * np.arange(count)).astype(dtype).reshape(shape)
    return (np.arange(count) % 100 - 50 * (np.dtype(dtype).kind != "u")).astype(dtype).reshape(shape)


def _mrc_file(tmp_path: Path, values: np.ndarray, fortran: bool = False,
              placement: Placement = NOWHERE) -> Path:
    header = mrc_header(values.dtype, values.shape, fortran, lambda: placement)
    path = tmp_path / f"data-{len(list(tmp_path.iterdir()))}.mrc"
    path.write_bytes(header + values.tobytes(order="F" if fortran else "C"))
    return path


def _valid(path: Path) -> bool:
    report = io.StringIO()
    valid = mrcfile.validate(str(path), print_file=report)
    assert valid, report.getvalue()
    return valid


@contextlib.contextmanager
def _opened(path: Path) -> Any:
    with mrcfile.open(str(path), permissive=False) as mrc:
        yield mrc


@pytest.mark.parametrize("byteorder", ["<", ">"])
@pytest.mark.parametrize(("dtype", "mode"),
                         [("i1", 0), ("i2", 1), ("f4", 2), ("c8", 4), ("u2", 6), ("f2", 12)])
@pytest.mark.parametrize("shape", [(5, 7), (3, 5, 7), (2, 3, 4, 5)], ids=["image", "volume", "volume stack"])
def test_every_mode_and_layout_is_valid_and_reads_as_the_array(
        tmp_path: Path, dtype: str, mode: int, shape: tuple[int, ...], byteorder: str) -> None:
    values = _values(byteorder + dtype if dtype[1] != "1" else dtype, shape)
    path = _mrc_file(tmp_path, values)
    assert _valid(path)
    with _opened(path) as mrc:
        assert int(mrc.header.mode) == mode
        assert mrc.data.dtype == values.dtype and np.array_equal(mrc.data, values)
        assert {2: mrc.is_single_image, 3: mrc.is_volume, 4: mrc.is_volume_stack}[len(shape)]()
        assert mrc.header.nversion == 20140 and mrc.header.nsymbt == 0
        assert mrc.header.machst.tobytes() == (b"\x11\x11\0\0" if byteorder == ">" and dtype != "i1"
                                               else b"\x44\x44\0\0")
        assert mrc.header.dmax < mrc.header.dmin and mrc.header.rms < 0  # (statistics not determined)


def test_a_first_axis_of_time_or_channels_is_an_image_stack(tmp_path: Path) -> None:
    values = _values("<f4", (4, 5, 6))
    for kind in ("time", "channel"):
        axes = (Axis("t", kind), Axis("y", "space"), Axis("x", "space"))
        with _opened(_mrc_file(tmp_path, values, placement=Placement(axes=axes))) as mrc:
            assert mrc.is_image_stack() and np.array_equal(mrc.data, values)
            assert (int(mrc.header.nz), int(mrc.header.mz), int(mrc.header.ispg)) == (4, 1, 0)
    axes = (Axis("z", "space"), Axis("y", "space"), Axis("x", "space"))
    with _opened(_mrc_file(tmp_path, values, placement=Placement(axes=axes))) as mrc:
        assert mrc.is_volume()


def test_voxel_size_and_origin_in_angstrom(tmp_path: Path) -> None:
    """OME-Zarr's scale and translation, in micrometres and nanometres, as ångström along
    X, Y, Z (the array's last three axes, backwards)."""
    axes = (Axis("z", "space", "micrometer"), Axis("y", "space", "nanometer"), Axis("x", "space", "angstrom"))
    placement = Placement(spacing=(0.002, 1.5, 3.0), origin=(0.01, -3.0, 12.0), axes=axes)
    path = _mrc_file(tmp_path, _values("<i2", (3, 4, 5)), placement=placement)
    assert _valid(path)
    with _opened(path) as mrc:
        assert mrc.voxel_size.tolist() == pytest.approx((3.0, 15.0, 20.0))
        assert mrc.header.origin.tolist() == pytest.approx((12.0, -30.0, 100.0))
        assert mrc.header.cella.tolist() == pytest.approx((15.0, 60.0, 60.0))


def test_voxel_sizes_without_a_unit_are_not_given(tmp_path: Path) -> None:
    """A scale with no unit says nothing in ångström: cell 0 (undetermined), still valid."""
    placement = Placement(spacing=(2.0, 0.5), axes=(Axis("y", "space"), Axis("x", "space")))
    path = _mrc_file(tmp_path, _values("<f4", (4, 5)), placement=placement)
    assert _valid(path)
    with _opened(path) as mrc:
        assert mrc.voxel_size.tolist() == (0.0, 0.0, 0.0)


@pytest.mark.parametrize("shape", [(5, 7), (3, 5, 7)], ids=["image", "volume"])
def test_fortran_order_maps_columns_to_the_first_axis(tmp_path: Path, shape: tuple[int, ...]) -> None:
    """In Fortran order the columns run along the array's first axis (Y of an image, Z of a
    volume): MAPC, MAPR, MAPS say so; X, Y, Z and their sizes stay the array's."""
    axes = tuple(Axis(n, "space", "nanometer") for n in "zyx"[-len(shape):])
    placement = Placement(spacing=(3.0, 2.0, 1.0)[-len(shape):], axes=axes)
    values = _values("<u2", shape)
    path = _mrc_file(tmp_path, values, True, placement)
    assert _valid(path)
    with _opened(path) as mrc:
        axis_map = (int(mrc.header.mapc), int(mrc.header.mapr), int(mrc.header.maps))
        assert axis_map == ((2, 1, 3) if len(shape) == 2 else (3, 2, 1))
        assert np.array_equal(mrc.data, values.T)  # (sections, rows, columns: the array reversed)
        assert mrc.voxel_size.tolist()[: len(shape)] == (10.0, 20.0, 30.0)[: len(shape)]
        assert (int(mrc.header.mx), int(mrc.header.my)) == (shape[-1], shape[-2])


@pytest.mark.parametrize(("dtype", "shape", "fortran", "why"), [
    ("u1", (3, 4), False, "no mode for uint8"), ("<f8", (3, 4), False, "no mode for float64"),
    ("<i4", (3, 4), False, "no mode for int32"), ("<i2", (7,), False, "not 1"),
    ("<i2", (1,) * 5, False, "not 5"),
    ("<i2", (3, 0), False, "empty"), ("<i2", (2, 3, 4, 5), True, "Fortran order"),
    ([("r", "u1"), ("g", "u1")], (3, 4), False, "no mode"),
])
def test_what_mrc_cannot_hold_is_refused_saying_why(dtype: Any, shape: tuple[int, ...], fortran: bool,
                                                    why: str) -> None:
    with pytest.raises(CannotHold, match=why):
        mrc_header(np.dtype(dtype), shape, fortran, lambda: NOWHERE)
    stack = Placement(axes=(Axis("c", "channel"), Axis("y"), Axis("x")))
    with pytest.raises(CannotHold, match="Fortran order"):
        mrc_header(np.dtype("<i2"), (2, 3, 4), True, lambda: stack)
