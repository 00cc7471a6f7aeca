"""The layouts and the numpy model of tests/reliability/test_mount_model.py: small arrays
(3-13 KB, with partial edge chunks) in plain chunks; shards with the index at the end and at
the start; shards of shards; transpose + big-endian bytes codec (mounted with endian=big, in
3-D); "v2" chunk keys; a float32 array whose fill value is NaN. The model is the flat file
itself (a numpy array in the file's byte order); TensorStore reads the store directly.
Hypothesis's settings for the machine (tests/helpers/mount_machine.py), bounded for CI unless
ZARRFS_SOAK is set, and the figures it counts.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import tensorstore as ts
from hypothesis import HealthCheck, Phase, settings

SOAK = int(os.environ.get("ZARRFS_SOAK", "0") or 0)
IN_CI = bool(os.environ.get("CI"))
# CI replays the same examples every time (no failure that depends on the day); locally and in
# soak runs every run explores new ones and replays past failures from .hypothesis/.
MODEL_SETTINGS = settings(
    max_examples=SOAK or 5,
    stateful_step_count=50 if SOAK else 25,
    deadline=None,
    derandomize=IN_CI and not SOAK,
    database=None if IN_CI and not SOAK else settings.default.database,
    suppress_health_check=list(HealthCheck),
    print_blob=True,
    # Shrinking replays sequences of real mounts: minutes. The failing sequence is printed
    # whole without it; ZARRFS_SHRINK=1 asks for the shortest one.
    phases=[p for p in Phase if p != Phase.shrink or os.environ.get("ZARRFS_SHRINK")],
)
STEPS_BETWEEN_REMOUNTS = 10  # a remount costs ~0.5 s; this bounds how many an example makes
MAX_WRITE = 3000  # bytes

STATS: Counter[str] = Counter()

# -- layouts ----------------------------------------------------------------------------------


def _bytes(endian: str = "little") -> dict[str, Any]:
    return {"name": "bytes", "configuration": {"endian": endian}}


_ZSTD = {"name": "zstd", "configuration": {"level": 1, "checksum": False}}
_GZIP = {"name": "gzip", "configuration": {"level": 1}}


def _sharding(inner: list[int], codecs: list[dict[str, Any]], at: str) -> dict[str, Any]:
    return {"name": "sharding_indexed", "configuration": {
        "chunk_shape": inner, "codecs": codecs,
        "index_codecs": [_bytes(), {"name": "crc32c"}], "index_location": at}}


def _doc(shape: list[int], dtype: str, chunks: list[int], codecs: list[dict[str, Any]],
         fill: Any = 0, keys: tuple[str, str] = ("default", "/")) -> dict[str, Any]:
    return {
        "zarr_format": 3, "node_type": "array", "shape": shape, "data_type": dtype,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunks}},
        "chunk_key_encoding": {"name": keys[0], "configuration": {"separator": keys[1]}},
        "fill_value": fill, "codecs": codecs, "attributes": {},
    }


@dataclass(frozen=True)
class Layout:
    name: str
    doc: dict[str, Any]
    options: tuple[str, ...] = ()

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.doc["shape"])

    @property
    def chunk_shape(self) -> tuple[int, ...]:
        """The shape of one chunk file: the chunk, or the shard when sharded."""
        return tuple(self.doc["chunk_grid"]["configuration"]["chunk_shape"])

    @property
    def grid(self) -> tuple[int, ...]:
        return tuple(-(-s // c) for s, c in zip(self.shape, self.chunk_shape, strict=True))

    @property
    def file_dtype(self) -> np.dtype[Any]:
        order = ">" if "endian=big" in self.options else "<"
        return np.dtype(self.doc["data_type"]).newbyteorder(order)

    @property
    def fill(self) -> np.ndarray:
        value = self.doc["fill_value"]
        return np.array(float(value) if isinstance(value, str) else value, dtype=self.file_dtype)

    def region(self, index: tuple[int, ...]) -> tuple[tuple[slice, ...], tuple[slice, ...]]:
        """Where chunk file `index` lies: (its part inside the array, the same part inside the
        chunk file); the rest of the chunk file is overhang past the array's edge."""
        in_array, in_chunk = [], []
        for i, c, s in zip(index, self.chunk_shape, self.shape, strict=True):
            stop = min((i + 1) * c, s)
            in_array.append(slice(i * c, stop))
            in_chunk.append(slice(0, stop - i * c))
        return tuple(in_array), tuple(in_chunk)

    def chunk_key(self, index: tuple[int, ...]) -> str:
        name, separator = (self.doc["chunk_key_encoding"][k] for k in ("name", "configuration"))
        parts = [*(["c"] if name == "default" else []), *map(str, index)]
        return separator["separator"].join(parts)


LAYOUTS = [
    Layout("plain", _doc([37, 45], "uint16", [8, 10], [_bytes(), _ZSTD])),
    Layout("shard-index-end", _doc([40, 50], "int32", [16, 20],
                                   [_sharding([4, 5], [_bytes(), _ZSTD], "end")])),
    Layout("shard-index-start", _doc([30, 44], "int64", [12, 16],
                                     [_sharding([6, 8], [_bytes(), _GZIP], "start")], fill=7)),
    Layout("nested-shards", _doc([48, 40], "uint32", [24, 20], [
        _sharding([12, 10], [_sharding([6, 5], [_bytes(), _ZSTD], "end")], "start")])),
    Layout("transpose-big-endian", _doc([9, 14, 11], "int16", [4, 6, 5], [
        {"name": "transpose", "configuration": {"order": [2, 0, 1]}}, _bytes("big"), _ZSTD]),
        options=("endian=big",)),
    Layout("v2-keys", _doc([33, 50], "int32", [10, 10], [_bytes(), _ZSTD], fill=-1,
                           keys=("v2", "."))),
    Layout("nan-fill-float32", _doc([41, 39], "float32", [10, 13], [_bytes(), {"name": "crc32c"}],
                                    fill="NaN")),
]


# -- the model --------------------------------------------------------------------------------


class Model:
    """The array as the mount shows it: `values` in the file's byte order."""

    def __init__(self, layout: Layout, values: np.ndarray) -> None:
        self.layout = layout
        self.values = np.ascontiguousarray(values.astype(layout.file_dtype))
        self.itemsize = self.values.dtype.itemsize

    def size(self, target: str | tuple[int, ...]) -> int:
        shape = self.layout.shape if target == "data" else self.layout.chunk_shape
        return math.prod(shape) * self.itemsize

    def chunk(self, index: tuple[int, ...]) -> np.ndarray:
        """A chunk file's elements: the chunk's values, the fill value in the overhang."""
        padded = np.full(self.layout.chunk_shape, self.layout.fill, dtype=self.values.dtype)
        in_array, in_chunk = self.layout.region(index)
        padded[in_chunk] = self.values[in_array]
        return padded

    def read(self, target: str | tuple[int, ...]) -> bytes:
        elements = self.values if target == "data" else self.chunk(target)  # type: ignore[arg-type]
        return elements.tobytes()

    def write(self, target: str | tuple[int, ...], offset: int, payload: bytes) -> int:
        """Apply a write; how many bytes a pwrite of `payload` at `offset` reports."""
        size = self.size(target)
        payload = payload[: max(0, size - offset)]
        elements = self.values if target == "data" else self.chunk(target)  # type: ignore[arg-type]
        flat = elements.reshape(-1).view(np.uint8)
        flat[offset : offset + len(payload)] = np.frombuffer(payload, np.uint8)
        if target != "data":
            in_array, in_chunk = self.layout.region(target)  # type: ignore[arg-type]
            self.values[in_array] = elements[in_chunk]  # the overhang is dropped
        return len(payload)


# -- comparisons ------------------------------------------------------------------------------


def assert_same_bytes(actual: bytes, expected: bytes, what: str, itemsize: int) -> None:
    if actual == expected:
        return
    if len(actual) != len(expected):
        raise AssertionError(f"{what}: {len(actual)} bytes, expected {len(expected)}")
    diff = np.flatnonzero(np.frombuffer(actual, np.uint8) != np.frombuffer(expected, np.uint8))
    first = int(diff[0])
    start = first - first % itemsize
    raise AssertionError(
        f"{what}: {len(diff)} bytes differ, the first at byte {first} "
        f"(element {first // itemsize}): "
        f"{actual[start : start + 4 * itemsize].hex(' ', itemsize)} instead of "
        f"{expected[start : start + 4 * itemsize].hex(' ', itemsize)}")


def tensorstore_read(root: Path) -> np.ndarray:
    spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(root)}}
    return np.asarray(ts.open(spec, open=True).result().read().result())
