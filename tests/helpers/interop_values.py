"""The interop matrix's data types (interop_cases.py): how each is stored in numpy, its values
compared bit for bit, an element of it, and random values with its special ones."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import ml_dtypes
import numpy as np

STORAGE: dict[str, np.dtype[Any]] = {
    "bool": np.dtype(np.bool_),
    "int4": np.dtype(np.int8),
    "int8": np.dtype(np.int8),
    "uint8": np.dtype(np.uint8),
    "int16": np.dtype(np.int16),
    "uint16": np.dtype(np.uint16),
    "int32": np.dtype(np.int32),
    "uint32": np.dtype(np.uint32),
    "int64": np.dtype(np.int64),
    "uint64": np.dtype(np.uint64),
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float32": np.dtype(np.float32),
    "float64": np.dtype(np.float64),
    "complex64": np.dtype(np.complex64),
    "complex128": np.dtype(np.complex128),
    # The registry's types TensorStore writes too (and its float8_e4m3fn, not registered).
    "int2": np.dtype(np.int8),
    "float8_e5m2": np.dtype(ml_dtypes.float8_e5m2),
    "float8_e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn),
    "float8_e4m3fnuz": np.dtype(ml_dtypes.float8_e4m3fnuz),
    "float8_e4m3b11fnuz": np.dtype(ml_dtypes.float8_e4m3b11fnuz),
    "float8_e5m2fnuz": np.dtype(ml_dtypes.float8_e5m2fnuz),
}
DATA_TYPES = list(STORAGE)
# zarr-python 3.1 has none of int4, bfloat16, int2 and the float8 types.
ZARR_PYTHON_DTYPES = frozenset(DATA_TYPES) - {"int4", "bfloat16", "int2"} - {
    dt for dt in DATA_TYPES if dt.startswith("float8")}


def bits(a: np.ndarray | np.generic) -> np.ndarray:
    """The raw bytes of an array's elements (C order), for bit-for-bit comparisons."""
    return np.ascontiguousarray(np.asarray(a)).reshape(-1).view(np.uint8)


def assert_same_bits(actual: Any, expected: np.ndarray, what: str) -> None:
    actual = np.asarray(actual)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    assert actual.dtype.itemsize == expected.dtype.itemsize, (
        f"{what}: dtype {actual.dtype} is not the size of {expected.dtype}"
    )
    a, e = bits(actual), bits(expected)
    if not np.array_equal(a, e):
        size = expected.dtype.itemsize
        wrong = np.flatnonzero((a != e).reshape(-1, size).any(axis=1))
        first = np.unravel_index(int(wrong[0]), expected.shape) if expected.shape else ()
        raise AssertionError(
            f"{what}: {wrong.size} of {expected.size} elements differ; first at {first}: "
            f"got {actual[first]!r} (bits {bits(actual[first]).tobytes().hex()}), "
            f"expected {expected[first]!r} (bits {bits(expected[first]).tobytes().hex()})"
        )


def _float_element(value: Any, dtype: np.dtype[Any]) -> np.ndarray:
    if isinstance(value, str) and value.startswith("0x"):
        raw = int(value, 16).to_bytes(dtype.itemsize, "little")
        return np.frombuffer(raw, dtype=dtype).copy()
    number = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}.get(value, value)
    return np.array([number], dtype=dtype)


def element(value: Any, data_type: str) -> np.ndarray:
    """One element (as a 1-element array of the storage dtype) from its JSON form."""
    dtype = STORAGE[data_type]
    if data_type.startswith("complex"):
        part = np.dtype(f"f{dtype.itemsize // 2}")
        pair = np.concatenate([_float_element(value[0], part), _float_element(value[1], part)])
        return pair.view(dtype)
    if data_type.startswith(("float", "bfloat")):
        return _float_element(value, dtype)
    return np.array([value], dtype=dtype)


def random_values(data_type: str, shape: Sequence[int], rng: np.random.Generator) -> np.ndarray:
    """Random elements; floats are random bit patterns (NaN payloads, -0.0, subnormals)."""
    dtype = STORAGE[data_type]
    n = math.prod(shape)
    if data_type == "bool":
        values = rng.integers(0, 2, n).astype(bool)
    elif data_type in ("int2", "int4"):
        bound = 2 if data_type == "int2" else 8
        values = rng.integers(-bound, bound, n).astype(np.int8)
    elif dtype.kind in "iu":
        info = np.iinfo(dtype)
        values = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
    else:
        values = rng.integers(0, 256, n * dtype.itemsize, dtype=np.uint8).view(dtype).copy()
        if n >= 4:  # the values that trip up "equal" comparisons
            specials: list[Any] = [-0.0, math.inf, math.nan]
            if dtype.kind == "c":
                specials = [complex(-0.0, math.nan), complex(math.inf, -0.0)]
            values[: len(specials)] = np.array(specials).astype(dtype)
    return values.reshape(tuple(shape))
