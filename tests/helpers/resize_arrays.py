"""What the resize tests (tests/array/writes/test_resize_*.py) share: an int16 array (v3, v3
sharded, v2) with a fill value, created with zarr-python, and the store read back by
zarr-python and TensorStore: its shape, values and chunk rows."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import tensorstore as ts
import zarr

SHAPE = (10, 6)
FILL = -7
ROW = 6 * 2  # bytes in one row of `data` (int16)
KINDS = ["v3", "v3-sharded", "v2"]


def initial_values(shape: tuple[int, ...] = SHAPE) -> np.ndarray:
    return (np.arange(int(np.prod(shape)), dtype=np.int16) * 37 + 1).reshape(shape)


def create_resizable(path: Path, kind: str, values: np.ndarray | None = None) -> np.ndarray:
    """A (10, 6) int16 array with fill value -7: v3 with chunks (4, 3); v3 with shards (4, 6)
    of (2, 3) chunks; v2 with chunks (4, 3). Chunk grid: 3 rows of chunks (shards)."""
    values = initial_values() if values is None else values
    if kind == "v2":
        array = zarr.create_array(path, shape=values.shape, dtype="<i2", chunks=(4, 3), fill_value=FILL,
                                  zarr_format=2)
    else:
        array = zarr.create_array(path, shape=values.shape, dtype="<i2", fill_value=FILL,
                                  chunks=(2, 3) if kind == "v3-sharded" else (4, 3),
                                  shards=(4, 6) if kind == "v3-sharded" else None)
    array[...] = values
    return values.copy()


def read_zarr(path: Path) -> np.ndarray:
    return np.asarray(zarr.open_array(path, mode="r")[...])


def read_tensorstore(path: Path, kind: str) -> np.ndarray:
    spec = {"driver": "zarr" if kind == "v2" else "zarr3", "kvstore": {"driver": "file", "path": str(path)}}
    return np.asarray(ts.open(spec, open=True).result().read().result())


def stored_shape(path: Path, kind: str) -> list[int]:
    meta = json.loads((path / (".zarray" if kind == "v2" else "zarr.json")).read_bytes())
    return list(meta["shape"])


def chunk_rows(directory: Path, kind: str) -> set[str]:
    """The first index of every chunk (shard) in a mount's `chunks/` (by listing) or in a
    store (by its files: a store may keep a directory emptied of chunks)."""
    if kind == "v2":
        return {name.split(".")[0] for name in os.listdir(directory) if name[0].isdigit()}
    c = directory / "c"
    if directory.name == "chunks":
        return set(os.listdir(c))
    return {p.relative_to(c).parts[0] for p in c.rglob("*") if p.is_file()} if c.exists() else set()


def read_data(mount: Any) -> np.ndarray:
    return np.fromfile(mount.data, dtype="<i2").reshape(-1, SHAPE[1])


def assert_store_holds(path: Path, kind: str, want: np.ndarray) -> None:
    """The store holds `want`, for both readers."""
    assert stored_shape(path, kind) == list(want.shape)
    assert np.array_equal(read_zarr(path), want)
    assert np.array_equal(read_tensorstore(path, kind), want)
