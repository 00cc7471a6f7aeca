"""Voxel spacings of the header views from an OME-Zarr group's scales on a real mount (written
by `ome-zarr`, and v0.5 by hand); scales that do not fit are ignored."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import hdf5plugin  # noqa: F401  (registers the zstd filter: data.h5 passes zstd chunks through)
import numpy as np
import pytest
import zarr
from ome_zarr.writer import write_image

from tests.helpers.header_views import ALL_VIEWS, FITS, H5, MRC, NII, TIFF, read_nrrd, read_sitk, views_in

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
        data, fields = read_nrrd(mount.path / level / "data.raw.nhdr", False)
        assert np.array_equal(data, want) and fields["axis spacings"] == scale
        values, spacing = read_sitk(mount.path / level / "data.mhd", False)
        assert np.array_equal(values, want) and spacing == scale
    level = datasets[1]["path"]
    fortran = mount_array(store, ["ro", "order=F"])
    values, spacing = read_sitk(fortran.path / level / "data.raw.nhdr", True)
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
        data, fields = read_nrrd(mount.path / name / "data.raw.nhdr", False)
        assert np.array_equal(data, values) and fields["axis spacings"] == scale
        assert read_sitk(mount.path / name / "data.mhd", False)[1] == scale
    assert "spacings" not in read_nrrd(mount.path / "labels_like" / "data.raw.nhdr", False)[1]
    assert read_sitk(mount.path / "labels_like" / "data.mhd", False)[1] == [1.0, 1.0]


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
    assert views_in(mount.path / "0") == ALL_VIEWS | TIFF | H5 | NII | MRC | FITS
    data, fields = read_nrrd(mount.path / "0" / "data.raw.nhdr", False)
    assert np.array_equal(data, values) and "spacings" not in fields
    image, spacing = read_sitk(mount.path / "0" / "data.mhd", False)
    assert np.array_equal(image, values) and spacing == [1.0, 1.0]
