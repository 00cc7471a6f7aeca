"""Zarr v1 arrays on a real mount, read: the layout, metadata, `data` and chunk files of each
case written by the specification's writer (tests/helpers/v1_spec.py), the big-endian view, a
missing chunk with a null fill, and `zarrfs info`."""

from __future__ import annotations

import json
import math
import os
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers.mounting import ZARRFS
from tests.helpers.v1_spec import (
    V1Case,
    chunk_key,
    expected_chunk,
    grid_shape,
    little,
    stored_case,
    values,
    write_v1,
)

# -- reading through the mount ---------------------------------------------------------------


def test_layout_metadata_data_and_chunks(v1_store: tuple[V1Case, Path, np.ndarray], mount_array: Any) -> None:
    case, path, array = v1_store
    mount = mount_array(path, options=("ro",))
    listed = set(os.listdir(mount.path))
    assert {"attrs", "chunks", "data", "meta"} <= listed
    assert all(name.startswith("data.") for name in listed - {"attrs", "chunks", "data", "meta"}), listed
    assert (mount.path / "meta").read_bytes() == (path / "meta").read_bytes()
    assert (mount.path / "attrs").read_bytes() == (path / "attrs").read_bytes()
    dtype = case.np_dtype
    assert mount.data.stat().st_size == math.prod(case.shape) * dtype.itemsize
    on_mount = np.fromfile(mount.data, dtype=little(dtype)).reshape(case.shape)
    assert on_mount.tobytes() == array.astype(little(dtype)).tobytes()
    expected_keys = sorted(chunk_key(i) for i in np.ndindex(*grid_shape(case.shape, case.chunks)))
    assert sorted(os.listdir(mount.path / "chunks")) == expected_keys
    problems = []
    for index in np.ndindex(*grid_shape(case.shape, case.chunks)):
        chunk = mount.chunk(chunk_key(index))
        if chunk.read_bytes() != expected_chunk(case, array, index):
            problems.append(chunk_key(index) + (" (missing in store)" if index in case.missing else ""))
    assert not problems, f"chunk files differ from the writer's array: {problems}"

    # Extended attributes, on the array directory and on `data`.
    for target in (mount.path, mount.data):
        assert os.getxattr(target, "user.zarr.shape").decode() == ",".join(map(str, case.shape))
        assert os.getxattr(target, "user.zarr.chunks").decode() == ",".join(map(str, case.chunks))
        stored_dtype = os.getxattr(target, "user.zarr.dtype").decode()
        if dtype.names:
            assert [tuple(f) for f in json.loads(stored_dtype)] == little(dtype).descr
        else:
            assert stored_dtype == little(dtype).str
        fill_json = json.loads(os.getxattr(target, "user.zarr.fill_value"))
        if case.fill_value is not None:  # null: the stored null or the zeros it reads as
            assert fill_json == case.fill_value
        assert json.loads(os.getxattr(target, "user.zarr.attributes")) == case.attrs


@pytest.mark.parametrize("name", ["be-i4-bz2-order-F", "structured-zlib", "c16-bz2-order-F",
                                  "datetime64-D-zlib", "bool-blosc-bitshuffle-order-F"])
def test_big_endian_view(name: str, mount_array: Any, tmp_path: Path) -> None:
    case, path, array = stored_case(name, tmp_path)
    mount = mount_array(path, options=("ro", "endian=big"))
    big = case.np_dtype.newbyteorder(">")
    assert mount.data.read_bytes() == array.astype(big).tobytes()


def test_missing_chunk_with_null_fill_reads_as_zeros(mount_array: Any, tmp_path: Path) -> None:
    case = V1Case("<i4", (6, 4), (3, 4), "zlib", 1, None, missing=[(1, 0)])
    array = values(case)
    path = tmp_path / "v1.zarr"
    write_v1(path, case, array)
    mount = mount_array(path, options=("ro",))
    on_mount = np.fromfile(mount.data, dtype="<i4").reshape(case.shape)
    assert on_mount[:3].tolist() == array[:3].tolist()
    assert not on_mount[3:].any()
    assert mount.chunk("1.0").read_bytes() == bytes(3 * 4 * 4)


def test_info_describes_a_v1_array(tmp_path: Path) -> None:
    _case, path, _ = stored_case("be-i4-bz2-order-F", tmp_path)
    result = subprocess.run([ZARRFS, "info", str(path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    fields = dict(line.split(":", 1) for line in result.stdout.splitlines() if ":" in line)
    fields = {name.strip(): value.strip() for name, value in fields.items()}
    assert fields.get("zarr format") == "1", result.stdout
    assert fields.get("shape", "").replace(" ", "") in ("9x8", "9,8", "(9,8)"), result.stdout
