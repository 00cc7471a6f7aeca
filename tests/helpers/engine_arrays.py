"""What the property tests of the array engine (tests/array/test_engine_properties_*.py) share:
the storage types and their bits, the configuration of a random array and its values, and
fresh `memory://` stores."""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass
from typing import Any

import fsspec
import ml_dtypes
import numpy as np

from zarrfs.store import Store

STORAGE = {
    "bool": np.dtype(np.bool_),
    "int4": np.dtype(np.int8),
    "uint8": np.dtype(np.uint8),
    "int16": np.dtype(np.int16),
    "uint32": np.dtype(np.uint32),
    "int64": np.dtype(np.int64),
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float32": np.dtype(np.float32),
    "float64": np.dtype(np.float64),
    "complex64": np.dtype(np.complex64),
}


def raw(a: Any) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(a)).reshape(-1).view(np.uint8)


def assert_bits(actual: Any, expected: np.ndarray, what: str) -> None:
    actual = np.asarray(actual)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
    assert np.array_equal(raw(actual), raw(expected)), f"{what}: contents differ"


# -- arrays ------------------------------------------------------------------------------------


@dataclass
class Config:
    doc: dict[str, Any]
    data_type: str
    shape: tuple[int, ...]
    chunk_shape: tuple[int, ...]  # the stored chunk (the shard when sharded)
    read_shape: tuple[int, ...]  # the inner chunk when sharded
    fill: np.ndarray  # 0-d
    cache_bytes: int

    def key(self, index: tuple[int, ...]) -> str:
        encoding = self.doc["chunk_key_encoding"]
        separator = encoding["configuration"]["separator"]
        if encoding["name"] == "default":
            return separator.join(["c", *map(str, index)])
        return separator.join(map(str, index)) if index else "0"


def values(config: Config, shape: tuple[int, ...], seed: int, mode: str) -> np.ndarray:
    """Random values of the data type, all fill, or random sprinkled with fill."""
    dtype = STORAGE[config.data_type]
    n = math.prod(shape)
    rng = np.random.default_rng(seed)
    if mode == "fill":
        return np.full(shape, config.fill, dtype=dtype)
    if config.data_type == "bool":
        out = rng.integers(0, 2, n).astype(bool)
    elif config.data_type == "int4":
        out = rng.integers(-8, 8, n).astype(np.int8)
    else:  # random bits: every NaN payload and -0.0 too
        out = rng.integers(0, 256, n * dtype.itemsize, dtype=np.uint8).view(dtype).copy()
    out = out.reshape(shape)
    if mode == "mixed":
        out[rng.random(shape) < 0.5] = config.fill
    return out


# -- the test ----------------------------------------------------------------------------------


def fresh_store() -> tuple[str, Store]:
    url = f"memory://zarrfs-properties/{uuid.uuid4().hex}"
    return url, Store.open(url)


def forget(url: str) -> None:
    fs = fsspec.filesystem("memory")
    path = url.removeprefix("memory://")
    if fs.exists(path):
        fs.rm(path, recursive=True)
