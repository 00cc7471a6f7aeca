"""A group of arrays of many element types, shapes and codecs, written by zarr-python, for the
tests of the header views over `data` (test_nifti_view.py, test_mrc_view.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import zarr
from zarr.codecs import BloscCodec, BytesCodec

# name: (dtype as stored, shape, chunks, shards, compressor: "zstd" or "blosc")
Arrays = dict[str, tuple[str, tuple[int, ...], tuple[int, ...], tuple[int, ...] | None, str]]


def random_values(dtype: str, shape: tuple[int, ...], seed: int) -> np.ndarray:
    """Values over the type's range (64-bit integers within a double's, which MRtrix3 converts
    through); no NaN."""
    rng = np.random.default_rng(seed)
    kind = np.dtype(dtype).kind
    if kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    if kind in "iu":
        info = np.iinfo(dtype)
        low, high = max(info.min, -(2**53)), min(info.max, 2**53)
        return rng.integers(low, high, shape, endpoint=True).astype(dtype)
    if kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return (rng.standard_normal(shape) * 1e3).astype(dtype)


def write_group(path: Path, arrays: Arrays) -> dict[str, np.ndarray]:
    """A v3 group at `path` of every array of `arrays` (big-endian ones in big-endian chunks),
    and what zarr-python reads of each."""
    group = zarr.open_group(path, mode="w", zarr_format=3)
    expected = {}
    for seed, (name, (dtype, shape, chunks, shards, compressor)) in enumerate(arrays.items()):
        values = random_values(dtype, shape, seed)
        serializer: Any = BytesCodec(endian="big") if dtype.startswith(">") else "auto"
        array = group.create_array(name, shape=shape, dtype=values.dtype.newbyteorder("="), chunks=chunks,
                                   shards=shards, serializer=serializer,
                                   compressors=BloscCodec() if compressor == "blosc" else "auto")
        array[...] = values
        expected[name] = np.asarray(zarr.open_array(path / name, mode="r")[...])
    return expected
