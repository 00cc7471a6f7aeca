"""Zarr v1 stores written and read by following the v1 storage specification (docs:
zarr-v1-spec.rst) to the letter, for the tests of Zarr v1 (tests/formats/test_v1_*.py).

No maintained library writes Zarr v1: a `meta` key holding the JSON metadata (zarr_format 1,
shape, chunks, dtype as a typestr or a structured descr list, compression none/zlib/bz2/blosc
with its compression_opts, fill_value, order), an `attrs` key, and one key per chunk named by
its grid index joined with "." ("2.4"), holding the chunk's raw bytes (in the array's order and
byte order) passed through the primary compressor with no header added. Chunks are compressed
with the zlib and bz2 modules and numcodecs' Blosc, not with zarrfs. A decoder written from
the same specification checks what zarrfs writes back. The cases, and the fixture `v1_store`
(tests/formats/conftest.py) that writes each.
"""

from __future__ import annotations

import bz2
import json
import math
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np

# -- the specification, both ways ------------------------------------------------------------


@dataclass
class V1Case:
    """An array to store as Zarr v1 (`values` is filled in by `values()`)."""

    dtype: Any  # the `dtype` member as stored: a typestr or a descr list
    shape: tuple[int, ...]
    chunks: tuple[int, ...]
    compression: str  # "none", "zlib", "bz2" or "blosc"
    compression_opts: Any
    fill_value: Any  # JSON scalar or None
    order: str = "C"
    missing: list[tuple[int, ...]] = field(default_factory=list)  # chunks never written
    junk_overhang: bool = False  # fill the part of edge chunks past the array with 0xA5 bytes
    attrs: dict[str, Any] = field(default_factory=lambda: {"units": "m", "scale": [1, 2, 3]})

    @property
    def np_dtype(self) -> np.dtype:
        return v1_dtype(self.dtype)


def v1_dtype(stored: Any) -> np.dtype:
    """The numpy dtype of a `dtype` member: typestr ("<f8"), or descr ([["r", "|u1"], ...])."""
    if isinstance(stored, str):
        return np.dtype(stored)
    return np.dtype([tuple(f) for f in stored])


def fill_element(dtype: np.dtype, fill_value: Any) -> np.ndarray:
    """The fill value as a 0-d array; `null` as zeros (what zarrfs presents for it)."""
    out = np.zeros((), dtype=dtype)
    if fill_value is not None:
        out[()] = fill_value
    return out


def grid_shape(shape: tuple[int, ...], chunks: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(-(-s // c) for s, c in zip(shape, chunks, strict=True))


def chunk_key(index: tuple[int, ...]) -> str:
    return ".".join(map(str, index))


def region(index: tuple[int, ...], shape: tuple[int, ...], chunks: tuple[int, ...]) -> tuple[slice, ...]:
    return tuple(slice(i * c, min((i + 1) * c, s)) for i, c, s in zip(index, chunks, shape, strict=True))


def compress(raw: bytes, compression: str, opts: Any, itemsize: int) -> bytes:
    if compression == "none":
        return raw
    if compression == "zlib":
        return zlib.compress(raw, opts)
    if compression == "bz2":
        return bz2.compress(raw, opts)
    if compression == "blosc":
        codec = numcodecs.Blosc(cname=opts["cname"], clevel=opts["clevel"], shuffle=opts["shuffle"],
                                typesize=itemsize)
        return bytes(codec.encode(raw))
    raise ValueError(compression)


def decompress(stored: bytes, compression: str) -> bytes:
    if compression == "none":
        return stored
    if compression == "zlib":
        return zlib.decompress(stored)
    if compression == "bz2":
        return bz2.decompress(stored)
    if compression == "blosc":
        return bytes(numcodecs.Blosc().decode(stored))
    raise ValueError(compression)


def write_v1(path: Path, case: V1Case, values: np.ndarray) -> None:
    """Store `values` as a Zarr v1 array directory, chunk by chunk."""
    path.mkdir(parents=True)
    meta = {
        "zarr_format": 1,
        "shape": list(case.shape),
        "chunks": list(case.chunks),
        "dtype": case.dtype,
        "compression": case.compression,
        "compression_opts": case.compression_opts,
        "fill_value": case.fill_value,
        "order": case.order,
    }
    (path / "meta").write_text(json.dumps(meta, indent=4, sort_keys=True, ensure_ascii=True))
    (path / "attrs").write_text(json.dumps(case.attrs, indent=4, sort_keys=True))
    dtype = case.np_dtype
    for index in np.ndindex(*grid_shape(case.shape, case.chunks)):
        if index in case.missing:
            continue
        if case.junk_overhang:
            block = np.frombuffer(b"\xa5" * (math.prod(case.chunks) * dtype.itemsize), dtype=dtype)
            block = block.reshape(case.chunks).copy()
        else:
            block = np.full(case.chunks, fill_element(dtype, case.fill_value), dtype=dtype)
        part = values[region(index, case.shape, case.chunks)]
        block[tuple(slice(0, n) for n in part.shape)] = part
        raw = block.tobytes(order=case.order)
        (path / chunk_key(index)).write_bytes(compress(raw, case.compression, case.compression_opts,
                                                      dtype.itemsize))


def read_v1(path: Path) -> tuple[dict[str, Any], np.ndarray, set[str]]:
    """Decode a Zarr v1 array directory per the specification: (meta, array, chunk keys
    present). Every chunk key is read back; each must decompress to exactly one chunk."""
    meta = json.loads((path / "meta").read_text())
    assert meta["zarr_format"] == 1
    shape, chunks = tuple(meta["shape"]), tuple(meta["chunks"])
    dtype = v1_dtype(meta["dtype"])
    out = np.empty(shape, dtype=dtype)
    out[...] = fill_element(dtype, meta["fill_value"])
    present = set()
    for index in np.ndindex(*grid_shape(shape, chunks)):
        key = chunk_key(index)
        if not (path / key).exists():
            continue
        present.add(key)
        raw = decompress((path / key).read_bytes(), meta["compression"])
        assert len(raw) == math.prod(chunks) * dtype.itemsize, f"chunk {key}: {len(raw)} bytes"
        block = np.frombuffer(raw, dtype=dtype).reshape(chunks, order=meta["order"])
        part = out[region(index, shape, chunks)]
        part[...] = block[tuple(slice(0, n) for n in part.shape)]
    others = {p.name for p in path.iterdir()} - present - {"meta", "attrs"}
    assert not others, f"keys outside the grid in the store: {sorted(others)}"
    return meta, out, present


def values(case: V1Case, seed: int = 0) -> np.ndarray:
    """Distinct, deterministic values of the case's dtype (structured: per field)."""
    rng = np.random.default_rng(seed)
    dtype = case.np_dtype
    out = np.zeros(case.shape, dtype=dtype)
    fields = [(name, dtype.fields[name][0]) for name in dtype.names] if dtype.names else [(None, dtype)]
    for name, fdt in fields:
        n = math.prod(case.shape)
        if fdt.kind == "b":
            v = rng.integers(0, 2, n).astype(bool)
        elif fdt.kind in "iu":
            info = np.iinfo(fdt)
            v = rng.integers(max(info.min, -(10**6)), min(info.max, 10**6), n, endpoint=True)
        elif fdt.kind in "fc":
            v = rng.normal(size=n) * 1000
            if fdt.kind == "c":
                v = v + 1j * rng.normal(size=n)
        elif fdt.kind in "Mm":
            v = rng.integers(-(10**9), 10**9, n)
        elif fdt.kind == "S":
            v = np.array([bytes(rng.integers(97, 123, fdt.itemsize).astype(np.uint8))[: 1 + i % fdt.itemsize]
                          for i in range(n)])
        else:
            raise AssertionError(fdt)
        v = np.asarray(v).astype(fdt) if fdt.kind not in "Mm" else v.astype("<i8").view(fdt)
        target = out[name] if name else out
        target[...] = v.reshape(case.shape)
    return out


# -- the cases -------------------------------------------------------------------------------

BLOSC_LZ4 = {"cname": "lz4", "clevel": 5, "shuffle": 1}

CASES: dict[str, V1Case] = {
    "i4-zlib-2d-missing": V1Case("<i4", (10, 7), (4, 3), "zlib", 1, 42, missing=[(1, 1), (2, 2)]),
    "be-i4-bz2-order-F": V1Case(">i4", (9, 8), (4, 5), "bz2", 9, -7, order="F", missing=[(0, 1)]),
    "f8-blosc-lz4-3d": V1Case("<f8", (5, 6, 7), (2, 4, 3), "blosc", BLOSC_LZ4, 0.5,
                              missing=[(0, 0, 0), (2, 1, 2)]),
    "u1-none-1d-fill-null": V1Case("|u1", (23,), (5,), "none", None, None),
    "structured-zlib": V1Case([["r", "|u1"], ["g", "<u2"], ["b", ">f4"]], (6, 5), (4, 4), "zlib", 6,
                              None),
    "structured-blosc-order-F": V1Case([["x", "<i8"], ["y", "|S3"]], (5, 7), (2, 3), "blosc",
                                       {"cname": "zlib", "clevel": 1, "shuffle": 0}, None, order="F"),
    "bool-blosc-bitshuffle-order-F": V1Case("|b1", (13, 11), (5, 4), "blosc",
                                            {"cname": "zstd", "clevel": 3, "shuffle": 2}, True,
                                            order="F", missing=[(1, 1)]),
    "S5-bz2-1d": V1Case("|S5", (7,), (3,), "bz2", 1, None),
    "i2-blosc-noshuffle-3d-order-F": V1Case("<i2", (4, 5, 6), (3, 2, 4), "blosc",
                                            {"cname": "blosclz", "clevel": 9, "shuffle": 0}, 3,
                                            order="F", missing=[(1, 2, 1), (0, 0, 1)]),
    "u8-zlib-junk-overhang": V1Case("<u8", (11, 9), (4, 4), "zlib", 9, 9, junk_overhang=True),
    "be-f4-none-fill-null-junk-overhang": V1Case(">f4", (7, 3), (3, 2), "none", None, None,
                                                 junk_overhang=True),
    "datetime64-D-zlib": V1Case("<M8[D]", (12,), (5,), "zlib", 3, None),
    "c16-bz2-order-F": V1Case("<c16", (3, 4), (2, 3), "bz2", 2, None, order="F"),
}


def stored_case(name: str, tmp_path: Path) -> tuple[V1Case, Path, np.ndarray]:
    """The case written to tmp_path/v1.zarr, and the array it holds."""
    case = CASES[name]
    array = values(case)
    for index in case.missing:  # the writer's own array holds the fill value there too
        array[region(index, case.shape, case.chunks)] = fill_element(case.np_dtype, case.fill_value)
    path = tmp_path / "v1.zarr"
    write_v1(path, case, array)
    return case, path, array


def little(dtype: np.dtype) -> np.dtype:
    return dtype.newbyteorder("<")


def expected_chunk(case: V1Case, array: np.ndarray, index: tuple[int, ...]) -> bytes:
    """A chunk file's bytes: the whole chunk, C order, little-endian, overhang = fill."""
    block = np.full(case.chunks, fill_element(case.np_dtype, case.fill_value), dtype=case.np_dtype)
    part = array[region(index, case.shape, case.chunks)]
    block[tuple(slice(0, n) for n in part.shape)] = part
    return block.astype(little(case.np_dtype)).tobytes(order="C")
