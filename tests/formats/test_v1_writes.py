"""Zarr v1 arrays on a real mount, written: what zarrfs writes back is encoded per the
specification (checked by the decoder written from it, tests/helpers/v1_spec.py), and a chunk
of fill values written through `data` is deleted."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from tests.helpers.v1_spec import (
    BLOSC_LZ4,
    V1Case,
    chunk_key,
    expected_chunk,
    fill_element,
    grid_shape,
    little,
    read_v1,
    region,
    values,
    write_v1,
)

# -- writing through the mount ---------------------------------------------------------------


def test_writes_are_encoded_per_the_spec(v1_store: tuple[V1Case, Path, np.ndarray], mount_array: Any) -> None:
    """Write a run of elements through `data` and whole chunks through chunk files; after
    unmounting, the store decodes (per the spec, every chunk key) to the new values, `meta`
    and `attrs` are untouched, and a chunk written all-fill is gone from the store."""
    case, path, array = v1_store
    meta_before = (path / "meta").read_bytes()
    attrs_before = (path / "attrs").read_bytes()
    dtype = case.np_dtype
    itemsize = dtype.itemsize
    expected = array.copy()
    fresh = values(case, seed=1)
    grid = grid_shape(case.shape, case.chunks)
    first, last = (0,) * len(grid), tuple(g - 1 for g in grid)
    mount = mount_array(path)

    # 1. A run of elements through `data`, crossing chunk boundaries (C order, little-endian).
    flat_expected = expected.reshape(-1)
    start = math.prod(case.shape) // 3
    stop = min(math.prod(case.shape), start + max(case.chunks[-1] + 2, math.prod(case.shape) // 3))
    flat_expected[start:stop] = fresh.reshape(-1)[start:stop]
    with open(mount.data, "r+b") as f:
        f.seek(start * itemsize)
        f.write(fresh.reshape(-1)[start:stop].astype(little(dtype)).tobytes())
        f.flush()
        os.fsync(f.fileno())

    # 2. The first chunk rewritten whole through its chunk file (new values, fill overhang).
    first_region = region(first, case.shape, case.chunks)
    expected[first_region] = fresh[first_region][::-1] if case.shape[0] > 1 else fresh[first_region]
    new_first = expected_chunk(case, expected, first)
    with open(mount.chunk(chunk_key(first)), "r+b") as f:
        f.write(new_first)

    # 3. The last chunk rewritten all fill value: it must disappear from the store.
    writes_fill_chunk = case.fill_value is not None and last != first
    if writes_fill_chunk:
        expected[region(last, case.shape, case.chunks)] = fill_element(dtype, case.fill_value)
        with open(mount.chunk(chunk_key(last)), "r+b") as f:
            f.write(expected_chunk(case, expected, last))

    # Seen through the mount before unmounting.
    assert mount.data.read_bytes() == expected.astype(little(dtype)).tobytes()
    assert mount.unmount() == 0

    meta, decoded, present = read_v1(path)
    assert (path / "meta").read_bytes() == meta_before
    assert (path / "attrs").read_bytes() == attrs_before
    assert decoded.tobytes() == expected.tobytes()
    assert chunk_key(first) in present
    if writes_fill_chunk:
        assert chunk_key(last) not in present, "a chunk written all fill value is still stored"
    assert meta["compression"] == case.compression


def test_a_chunk_of_fill_values_written_through_data_is_deleted(mount_array: Any, tmp_path: Path) -> None:
    case = V1Case("<u2", (8, 6), (4, 3), "blosc", BLOSC_LZ4, 5)
    array = values(case)
    path = tmp_path / "v1.zarr"
    write_v1(path, case, array)
    mount = mount_array(path)
    array[4:8, 3:6] = 5
    with open(mount.data, "r+b") as f:
        for row in range(4, 8):
            f.seek((row * 6 + 3) * 2)
            f.write(np.full(3, 5, dtype="<u2").tobytes())
    assert mount.unmount() == 0
    _, decoded, present = read_v1(path)
    assert decoded.tolist() == array.tolist()
    assert present == {"0.0", "0.1", "1.0"}
