"""`data.mrc` on a real mount, opened by mrcfile and passed by its MRC2014 validator, against
zarr-python's values: every mode (int8, int16, float32, complex64, uint16, float16), images,
volumes and volume stacks, codecs (zstd, blosc, sharded, big-endian chunks), both byte orders
of the mount (`-o endian=`: the machine stamp says which) and both orders (`-o order=F`:
MAPC, MAPR, MAPS say where the columns run); OME-Zarr 0.4 and 0.5 images written by
ome-zarr-py (voxel sizes in ångström, origins, an image stack of channels); writes through
mrcfile's map in place.

The header alone: test_mrc_header.py. What has no data.mrc, and the log saying why:
test_nifti_view.py."""

from __future__ import annotations

import io
import warnings
from pathlib import Path
from typing import Any

import mrcfile
import numpy as np
import pytest
import zarr
from ome_zarr.format import FormatV04, FormatV05
from ome_zarr.writer import write_image

from tests.helpers.mounting import Mount
from tests.helpers.view_arrays import Arrays, random_values, write_group

# name: (dtype as stored, shape, chunks, shards, compressor)
ARRAYS: Arrays = {
    "i1": ("|i1", (6, 5), (4, 4), None, "zstd"),
    "i2_blosc": ("<i2", (3, 5, 6), (2, 2, 4), None, "blosc"),
    "f4_stack": ("<f4", (2, 3, 4, 5), (1, 1, 2, 5), (2, 3, 4, 5), "zstd"),
    "c8": ("<c8", (4, 6), (3, 3), None, "zstd"),
    "u2_big_sharded": (">u2", (4, 6, 11), (2, 3, 4), (4, 6, 8), "blosc"),
    "f2_big": (">f2", (5, 4, 3), (2, 2, 2), None, "zstd"),
}
MODES = {"i1": 0, "i2": 1, "f4": 2, "c8": 4, "u2": 6, "f2": 12}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, np.ndarray]]:
    path = tmp_path_factory.mktemp("mrc") / "arrays.zarr"
    return path, write_group(path, ARRAYS)


def _assert_valid(path: Path) -> None:
    report = io.StringIO()
    assert mrcfile.validate(str(path), print_file=report), report.getvalue()


@pytest.mark.parametrize("options", [(), ("endian=big",), ("order=F",), ("order=F", "endian=big")],
                         ids=["C-little", "C-big", "F-little", "F-big"])
def test_mrcfile_reads_and_validates_every_array(store: tuple[Path, dict[str, np.ndarray]], mount_array: Any,
                                                 options: tuple[str, ...]) -> None:
    path, expected = store
    fortran, big = "order=F" in options, "endian=big" in options
    mount: Mount = mount_array(path, ["ro", *options])
    for name, (dtype, shape, *_) in ARRAYS.items():
        mrc_path = mount.path / name / "data.mrc"
        if fortran and len(shape) == 4:  # (a stack's images would not be contiguous)
            assert not mrc_path.exists()
            continue
        _assert_valid(mrc_path)
        with mrcfile.open(str(mrc_path), permissive=False) as mrc:
            want = expected[name].T if fortran else expected[name]  # (sections, rows, columns)
            assert int(mrc.header.mode) == MODES[dtype[1:]], name
            assert np.array_equal(mrc.data, want), name
            if mrc.data.dtype.itemsize > 1:
                assert mrc.data.dtype.str[0] == (">" if big else "<"), name
                assert mrc.header.machst.tobytes()[:2] == (b"\x11\x11" if big else b"\x44\x44"), name
            assert {2: mrc.is_single_image, 3: mrc.is_volume, 4: mrc.is_volume_stack}[len(shape)](), name


@pytest.fixture(scope="module", params=["0.4", "0.5"])
def ome_image(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ome-zarr-py's images (0.4: Zarr v2; 0.5: v3): a volume of two levels, z and y in
    micrometres and x in nanometres; channels of images (c, y, x)."""
    path = tmp_path_factory.mktemp("ome") / "image.ome.zarr"
    fmt, zarr_format = (FormatV04(), 2) if request.param == "0.4" else (FormatV05(), 3)
    root = zarr.open_group(path, mode="w", zarr_format=zarr_format)
    units = {"z": "micrometer", "y": "micrometer", "x": "nanometer"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        volume = (np.arange(3 * 16 * 24) % 251).astype(np.int16).reshape(3, 16, 24)
        write_image(volume, root.create_group("volume"), fmt=fmt, axes="zyx", scale_factors=[2],
                    scale={"z": 2.0, "y": 0.5, "x": 250.0}, axes_units=units,
                    storage_options={"chunks": (1, 8, 8)})
        channels = (np.arange(2 * 8 * 12) % 97).astype(np.float32).reshape(2, 8, 12)
        write_image(channels, root.create_group("channels"), fmt=fmt, axes="cyx", scale_factors=[],
                    scale={"y": 0.5, "x": 250.0}, axes_units=units)
    return path


def test_voxel_sizes_and_origins_in_angstrom(ome_image: Path, mount_array: Any) -> None:
    """z 2 µm, y 0.5 µm, x 250 nm: 20,000, 5,000 and 2,500 Å; level s1 (twice x and y, its
    first voxel half a voxel in) has its own; channels are an image stack, Z of no size."""
    mount: Mount = mount_array(ome_image, ["ro"])
    for level, voxel, origin in (("s0", (2500.0, 5000.0, 20000.0), (0.0, 0.0, 0.0)),
                                 ("s1", (5000.0, 10000.0, 20000.0), (1250.0, 2500.0, 0.0))):
        path = mount.path / "volume" / level / "data.mrc"
        _assert_valid(path)
        with mrcfile.open(str(path)) as mrc:
            assert mrc.is_volume() and mrc.voxel_size.tolist() == pytest.approx(voxel)
            assert mrc.header.origin.tolist() == pytest.approx(origin)
            assert np.array_equal(mrc.data, zarr.open_array(ome_image / "volume" / level, mode="r")[...])
    path = mount.path / "channels" / "s0" / "data.mrc"
    _assert_valid(path)
    with mrcfile.open(str(path)) as mrc:
        assert mrc.is_image_stack() and mrc.voxel_size.tolist() == pytest.approx((2500.0, 5000.0, 0.0))
        assert np.array_equal(mrc.data, zarr.open_array(ome_image / "channels" / "s0", mode="r")[...])


@pytest.mark.parametrize("options", [(), ("endian=big",)], ids=["little", "big"])
def test_writes_through_mrcfiles_map_reach_the_store(tmp_path: Path, mount_array: Any,
                                                     options: tuple[str, ...]) -> None:
    """mrcfile.mmap in r+ mode: voxels written, the header written back as it was."""
    path = tmp_path / "a.zarr"
    values = random_values("<f4", (4, 6, 8), 9)
    zarr.create_array(path, shape=values.shape, chunks=(2, 4, 4), dtype="<f4", shards=(2, 4, 8))[...] = values
    mount: Mount = mount_array(path, ["rw", *options])
    with mrcfile.mmap(str(mount.path / "data.mrc"), mode="r+") as mrc:
        mrc.data[1, 2, 3] = -7.5
        mrc.data[3, :, 0] = 42.0
    values[1, 2, 3], values[3, :, 0] = -7.5, 42.0
    with mrcfile.open(str(mount.path / "data.mrc")) as mrc:
        assert np.array_equal(mrc.data, values)
    assert mount.unmount() == 0
    assert np.array_equal(zarr.open_array(path, mode="r")[...], values)
