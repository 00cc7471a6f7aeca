"""The interop matrix: Zarr v3 arrays described as `zarr.json` documents, a deterministic
model of their contents, and one writer and reader per implementation (TensorStore,
zarr-python, zarrfs).

Everything the tests compare against is computed here without zarrfs: fill values, chunk
keys and shard indexes are decoded independently, so a zarrfs bug cannot hide in the oracle.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import warnings
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import google_crc32c
import ml_dtypes
import numpy as np
import tensorstore as ts
import zarr

from zarrfs.array import ZarrArray
from zarrfs.array_metadata import create_array, open_array
from zarrfs.formats.v3 import metadata_from_json
from zarrfs.grid import Box
from zarrfs.store import Store

# -- data types ------------------------------------------------------------------------------

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


# -- metadata --------------------------------------------------------------------------------


def bytes_codec(endian: str | None = "little") -> dict[str, Any]:
    if endian is None:
        return {"name": "bytes"}
    return {"name": "bytes", "configuration": {"endian": endian}}


def default_bytes(data_type: str, endian: str = "little") -> dict[str, Any]:
    """`bytes`, without `endian` for one-byte types (the spec allows leaving it out)."""
    return bytes_codec(None if STORAGE[data_type].itemsize == 1 else endian)


def transpose(order: Any) -> dict[str, Any]:
    return {"name": "transpose", "configuration": {"order": order}}


def gzip(level: int) -> dict[str, Any]:
    return {"name": "gzip", "configuration": {"level": level}}


def zstd(level: int, checksum: bool = False) -> dict[str, Any]:
    return {"name": "zstd", "configuration": {"level": level, "checksum": checksum}}


def blosc(cname: str, clevel: int, shuffle: str, typesize: int | None, blocksize: int = 0) -> dict[
    str, Any
]:
    config: dict[str, Any] = {
        "cname": cname, "clevel": clevel, "shuffle": shuffle, "blocksize": blocksize
    }
    if typesize is not None:
        config["typesize"] = typesize
    return {"name": "blosc", "configuration": config}


CRC32C = {"name": "crc32c"}


def sharding(
    chunk_shape: Sequence[int],
    codecs: list[dict[str, Any]],
    index_codecs: list[dict[str, Any]] | None = None,
    location: str = "end",
) -> dict[str, Any]:
    return {
        "name": "sharding_indexed",
        "configuration": {
            "chunk_shape": list(chunk_shape),
            "codecs": codecs,
            "index_codecs": index_codecs or [bytes_codec(), CRC32C],
            "index_location": location,
        },
    }


def array_json(
    data_type: str,
    shape: Sequence[int],
    chunks: Sequence[int],
    codecs: list[dict[str, Any]],
    fill: Any = 0,
    key: tuple[str, str] = ("default", "/"),
    dimension_names: list[str | None] | None = None,
) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": list(shape),
        "data_type": data_type,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunks)}},
        "chunk_key_encoding": {"name": key[0], "configuration": {"separator": key[1]}},
        "fill_value": fill,
        "codecs": codecs,
        "attributes": {"case": "interop"},
    }
    if dimension_names is not None:
        doc["dimension_names"] = dimension_names
    return doc


def chunk_key(doc: dict[str, Any], index: Sequence[int]) -> str:
    encoding = doc["chunk_key_encoding"]
    name = encoding["name"]
    default = "/" if name == "default" else "."
    separator = encoding.get("configuration", {}).get("separator", default)
    if name == "default":
        return separator.join(["c", *map(str, index)])
    return separator.join(map(str, index)) if index else "0"


def is_default_dot(doc: dict[str, Any]) -> bool:
    encoding = doc["chunk_key_encoding"]
    separator = encoding.get("configuration", {}).get("separator", "/")
    return bool(encoding["name"] == "default" and separator == ".")


# -- cases -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    id: str
    doc: dict[str, Any]
    tensorstore: bool = True  # TensorStore accepts this metadata
    zarr_python: bool = True  # zarr-python accepts it (and the data type)
    # A value equal to the fill value but not bit for bit (-0.0 for 0.0, another NaN): one
    # whole read chunk is set to it, and it must be stored, not dropped.
    lookalike: Any = None

    @property
    def data_type(self) -> str:
        return str(self.doc["data_type"])

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.doc["shape"])

    @property
    def chunk_shape(self) -> tuple[int, ...]:
        return tuple(self.doc["chunk_grid"]["configuration"]["chunk_shape"])

    @property
    def fill(self) -> np.ndarray:
        return element(self.doc["fill_value"], self.data_type)

    @property
    def shard_config(self) -> dict[str, Any] | None:
        """The sharding configuration when sharding is the only codec (shards read by index)."""
        first = self.doc["codecs"][0]
        if first["name"] != "sharding_indexed" or len(self.doc["codecs"]) > 1:
            return None
        return dict(first["configuration"])

    @property
    def read_chunk_shape(self) -> tuple[int, ...]:
        config = self.shard_config
        return tuple(config["chunk_shape"]) if config else self.chunk_shape

    def grid(self, cell: Sequence[int]) -> list[tuple[int, ...]]:
        counts = [-(-s // c) for s, c in zip(self.shape, cell, strict=True)]
        return list(itertools.product(*(range(n) for n in counts)))


def _cell_slices(index: Sequence[int], cell: Sequence[int]) -> tuple[slice, ...]:
    return tuple(slice(i * c, (i + 1) * c) for i, c in zip(index, cell, strict=True))


def model(case: Case) -> np.ndarray:
    """The contents every writer writes: random, with holes that must not be stored."""
    rng = np.random.default_rng(zlib.crc32(case.id.encode()))
    data = random_values(case.data_type, case.shape, rng)
    if data.size == 0:
        return data
    fill = case.fill[0]
    chunks = case.grid(case.chunk_shape)
    if len(chunks) > 1:
        data[_cell_slices(chunks[0], case.chunk_shape)] = fill  # a missing chunk or shard
    if case.shard_config is not None and len(chunks) > 1:
        # A missing inner chunk in the last shard.
        last = _cell_slices(chunks[-1], case.chunk_shape)
        start = tuple(s.start for s in last)
        data[tuple(slice(a, a + c) for a, c in zip(start, case.read_chunk_shape, strict=True))] = (
            fill
        )
    if case.lookalike is not None:
        cells = case.grid(case.read_chunk_shape)
        data[_cell_slices(cells[len(cells) // 2], case.read_chunk_shape)] = element(
            case.lookalike, case.data_type
        )[0]
    if len(chunks) == 1 and data.size > 1 and case.shard_config is None and not case.lookalike:
        data.reshape(-1)[0] = fill  # some elements equal to the fill value
    return data


def expected_keys(case: Case, data: np.ndarray) -> set[str]:
    """The chunk (or shard) keys a writer that skips all-fill chunks must store."""
    fill = bits(case.fill)
    keys = set()
    for index in case.grid(case.chunk_shape):
        region = data[_cell_slices(index, case.chunk_shape)]
        if region.size and not (bits(region).reshape(-1, fill.size) == fill).all():
            keys.add(chunk_key(case.doc, index))
    return keys


def stored_keys(path: str) -> set[str]:
    found = set()
    for directory, _, files in os.walk(path):
        for name in files:
            key = os.path.relpath(os.path.join(directory, name), path).replace(os.sep, "/")
            if key != "zarr.json" and not name.startswith("."):
                found.add(key)
    return found


# -- shard indexes, decoded independently ----------------------------------------------------

EMPTY = (1 << 64) - 1


def shard_index(case: Case, shard: bytes) -> np.ndarray:
    """The (offset, nbytes) entries of a shard, checking the index's crc32c when present."""
    config = case.shard_config
    assert config is not None
    per_shard = [s // c for s, c in zip(case.chunk_shape, config["chunk_shape"], strict=True)]
    codecs = config["index_codecs"]
    endian = codecs[0].get("configuration", {}).get("endian", "little")
    has_crc = any(c["name"] == "crc32c" for c in codecs[1:])
    size = math.prod(per_shard) * 16 + (4 if has_crc else 0)
    raw = shard[:size] if config.get("index_location", "end") == "start" else shard[-size:]
    if has_crc:
        body, checksum = raw[:-4], raw[-4:]
        assert google_crc32c.value(body) == int.from_bytes(checksum, "little"), "index crc32c mismatch"
        raw = body
    dtype = np.dtype("<u8" if endian == "little" else ">u8")
    return np.frombuffer(raw, dtype=dtype).astype(np.uint64).reshape((*per_shard, 2))


def inner_chunk_bytes(case: Case, shard: bytes) -> dict[tuple[int, ...], bytes]:
    entries = shard_index(case, shard)
    found = {}
    for inner in np.ndindex(*entries.shape[:-1]):
        offset, nbytes = (int(v) for v in entries[inner])
        if offset != EMPTY:
            found[inner] = shard[offset : offset + nbytes]
    return found


# -- writers and readers ---------------------------------------------------------------------


def _ts_spec(path: str) -> dict[str, Any]:
    return {"driver": "zarr3", "kvstore": {"driver": "file", "path": path}}


def from_tensorstore(data: np.ndarray, data_type: str) -> np.ndarray:
    return np.asarray(data).astype(np.int8) if data_type in ("int2", "int4") else np.asarray(data)


def write_tensorstore(path: str, doc: dict[str, Any], data: np.ndarray) -> None:
    array = ts.open({**_ts_spec(path), "metadata": doc}, create=True).result()
    if data.size and doc["data_type"] in ("int2", "int4"):
        # Through an int8 view: TensorStore then holds int2/int4 sign-extended, as its fill value
        # is, so all-fill chunks are recognised (from ml_dtypes types they would not be).
        ts.cast(array, ts.int8)[...] = data
    elif data.size:
        array[...] = data


def read_tensorstore(path: str) -> tuple[np.ndarray, np.ndarray]:
    """TensorStore's view of an array: its contents and its fill value."""
    array = ts.open(_ts_spec(path), open=True).result()
    data_type = array.dtype.name
    data = from_tensorstore(array.read().result(), data_type)
    return data, from_tensorstore(np.asarray(array.fill_value), data_type).reshape(1)


def write_zarr_python(path: str, doc: dict[str, Any], data: np.ndarray) -> None:
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "zarr.json"), "w") as f:
        json.dump(doc, f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        array = zarr.open_array(path, mode="r+")
        if data.size:
            array[...] = data


def read_zarr_python(path: str) -> tuple[np.ndarray, np.ndarray]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        array = zarr.open_array(path, mode="r")
        data = np.asarray(array[...])
        return data, np.asarray(array.fill_value).reshape(1)


def write_boxes(shape: Sequence[int], rng: np.random.Generator) -> list[Box]:
    """Boxes that together cover an array, cut at places that do not follow the chunks."""
    if not shape:
        return [Box((), ())]
    if 0 in shape:
        return []
    cuts = [sorted({0, n, int(rng.integers(0, n + 1))}) for n in shape]
    boxes = []
    for bounds in itertools.product(*(itertools.pairwise(c) for c in cuts)):
        if all(b > a for a, b in bounds):
            boxes.append(Box(tuple(a for a, _ in bounds), tuple(b for _, b in bounds)))
    return boxes


def write_zarrfs(path: str, doc: dict[str, Any], data: np.ndarray, seed: int = 0) -> ZarrArray:
    """Create with zarrfs and write `data` piecewise: first garbage, then the real contents
    in boxes that straddle chunks, flushing in between so partial chunks are merged with
    stored ones. Returns the (closed) array for its stats."""
    rng = np.random.default_rng(seed)
    array = create_array(Store.open(path), metadata_from_json(doc), threads=2)
    try:
        boxes = write_boxes(data.shape, rng)
        if boxes:
            first = boxes[0]
            array.write(first, random_values(doc["data_type"], first.shape, rng))
            array.flush()
        for i, box in enumerate(boxes):
            array.write(box, data[box.slices()])
            if i % 2:
                array.flush()
        array.flush()
    finally:
        array.close()
    return array


def read_zarrfs(path: str, box: Box | None = None, **options: Any) -> np.ndarray:
    array = open_array(Store.open(path, read_only=True), threads=2, **options)
    try:
        whole = Box((0,) * len(array.shape), array.shape)
        return np.array(array.read(box or whole))
    finally:
        array.close()


def sub_boxes(shape: Sequence[int], rng: np.random.Generator, count: int) -> Iterator[Box]:
    """Random non-empty boxes inside an array."""
    if 0 in shape:
        return
    for _ in range(count):
        start, stop = [], []
        for n in shape:
            a, b = sorted(int(v) for v in rng.integers(0, n + 1, 2))
            if a == b:
                a, b = (a - 1, a) if a else (0, 1)
            start.append(a)
            stop.append(b)
        yield Box(tuple(start), tuple(stop))


# -- the matrix ------------------------------------------------------------------------------

# A fill value that is not zero for each data type.
FILLS: dict[str, Any] = {
    "bool": True,
    "int4": -3,
    "int8": -100,
    "uint8": 200,
    "int16": -12345,
    "uint16": 54321,
    "int32": -7,
    "uint32": 4000000000,
    "int64": -(2**40),
    "uint64": 2**63 + 5,
    "float16": 1.5,
    "bfloat16": -2.5,
    "float32": 3.25,
    "float64": -1e300,
    "complex64": [1.5, -2.0],
    "complex128": [-0.5, 1e200],
    "int2": -2,
    "float8_e5m2": "-Infinity",
    "float8_e4m3fn": "NaN",
    "float8_e4m3fnuz": -0.25,
    "float8_e4m3b11fnuz": "0x81",
    "float8_e5m2fnuz": 1.5,
}


def zero(data_type: str) -> Any:
    """The JSON form of zero (false, [0.0, 0.0]) for a data type."""
    return {"bool": False, "complex64": [0.0, 0.0], "complex128": [0.0, 0.0]}.get(data_type, 0)


def _dtype_cases() -> Iterator[Case]:
    for dt in DATA_TYPES:
        zp = dt in ZARR_PYTHON_DTYPES
        yield Case(f"dtype-{dt}", array_json(dt, [5, 7], [2, 3], [default_bytes(dt)], FILLS[dt]),
                   zarr_python=zp)
        if STORAGE[dt].itemsize > 1:
            yield Case(f"dtype-{dt}-big-endian",
                       array_json(dt, [5, 7], [2, 3], [bytes_codec("big")], zero(dt)),
                       zarr_python=zp)
        codecs = [sharding([2, 3], [default_bytes(dt), gzip(5)])]
        yield Case(f"dtype-{dt}-sharded-gzip",
                   array_json(dt, [9, 7], [4, 6], codecs, FILLS[dt]), zarr_python=zp)


def _codec_cases() -> Iterator[Case]:
    le = bytes_codec("little")
    be = bytes_codec("big")
    specs: list[tuple[str, str, list[int], list[int], list[dict[str, Any]]]] = [
        ("transpose-2d", "uint16", [5, 7], [2, 3], [transpose([1, 0]), le]),
        ("transpose-3d-big-endian", "float64", [3, 5, 7], [2, 3, 4], [transpose([2, 0, 1]), be]),
        ("transpose-4d-gzip", "int32", [3, 4, 5, 2], [2, 3, 2, 2],
         [transpose([3, 1, 0, 2]), le, gzip(1)]),
        ("transpose-twice", "int16", [3, 5, 7], [2, 3, 4],
         [transpose([1, 2, 0]), transpose([2, 0, 1]), be]),
        ("transpose-bool", "bool", [6, 5], [4, 3], [transpose([1, 0]), bytes_codec(None)]),
        ("gzip-0", "float32", [5, 7], [2, 3], [le, gzip(0)]),
        ("gzip-5-big-endian", "uint32", [5, 7], [2, 3], [be, gzip(5)]),
        ("gzip-9", "int64", [5, 7], [2, 3], [le, gzip(9)]),
        ("blosc-lz4-shuffle", "float32", [5, 7], [2, 3], [le, blosc("lz4", 5, "shuffle", 4)]),
        ("blosc-lz4-noshuffle", "uint16", [5, 7], [2, 3], [le, blosc("lz4", 5, "noshuffle", 2)]),
        ("blosc-zstd-bitshuffle", "int64", [5, 7], [2, 3],
         [le, blosc("zstd", 3, "bitshuffle", 8)]),
        ("blosc-zlib-shuffle-typesize-4-of-8", "float64", [5, 7], [2, 3],
         [le, blosc("zlib", 4, "shuffle", 4)]),
        ("blosc-blosclz-clevel-0", "uint8", [5, 7], [2, 3],
         [bytes_codec(None), blosc("blosclz", 0, "noshuffle", 1)]),
        ("blosc-lz4hc-blocksize", "complex64", [5, 7], [2, 3],
         [le, blosc("lz4hc", 9, "shuffle", 8, 64)]),
        ("blosc-big-endian-shuffle", "float32", [5, 7], [2, 3],
         [be, blosc("zstd", 5, "shuffle", 4)]),
        ("zstd-0", "float32", [5, 7], [2, 3], [le, zstd(0)]),
        ("zstd-3-checksum", "int16", [5, 7], [2, 3], [le, zstd(3, True)]),
        ("zstd-negative-level", "uint32", [5, 7], [2, 3], [le, zstd(-1)]),
        ("zstd-19-checksum-big-endian", "float64", [5, 7], [2, 3], [be, zstd(19, True)]),
        ("crc32c", "float32", [5, 7], [2, 3], [le, CRC32C]),
        ("gzip-crc32c", "int32", [5, 7], [2, 3], [le, gzip(6), CRC32C]),
        ("zstd-crc32c", "complex64", [5, 7], [2, 3], [le, zstd(5), CRC32C]),
        ("gzip-then-zstd", "uint16", [5, 7], [2, 3], [le, gzip(3), zstd(1)]),
        ("crc32c-then-zstd", "int8", [5, 7], [2, 3], [bytes_codec(None), CRC32C, zstd(1)]),
        ("transpose-big-endian-blosc-crc32c", "float32", [4, 5, 3], [3, 2, 2],
         [transpose([2, 1, 0]), be, blosc("lz4", 5, "bitshuffle", 4), CRC32C]),
    ]
    for name, dt, shape, chunks, codecs in specs:
        yield Case(f"codec-{name}", array_json(dt, shape, chunks, codecs, FILLS[dt]))
    # The spec requires `typesize` when shuffling; zarr-python and zarrfs default it to the
    # element size, TensorStore refuses the metadata.
    yield Case("codec-blosc-shuffle-no-typesize",
               array_json("int32", [5, 7], [2, 3], [le, blosc("lz4", 5, "shuffle", None)], -7),
               tensorstore=False)
    # TensorStore's extension: "C"/"F" for the identity and the reversal (zarr-python refuses).
    yield Case("codec-transpose-F-order", array_json("float32", [3, 5, 7], [2, 3, 4],
                                                     [transpose("F"), le], 0), zarr_python=False)


def _key_cases() -> Iterator[Case]:
    for name, sep in itertools.product(("default", "v2"), ("/", ".")):
        label = f"key-{name}-{'slash' if sep == '/' else 'dot'}"
        yield Case(label, array_json("int16", [3, 5, 7], [2, 2, 3], [bytes_codec()], 9,
                                     key=(name, sep)))
        codecs = [sharding([1, 2, 3], [bytes_codec()])]
        yield Case(f"{label}-sharded", array_json("int16", [3, 5, 7], [2, 4, 6], codecs, 9,
                                                  key=(name, sep)))
        yield Case(f"{label}-rank0", array_json("uint32", [], [], [bytes_codec()], 1,
                                                key=(name, sep)))


def _sharding_cases() -> Iterator[Case]:
    le = bytes_codec("little")
    u16 = "uint16"
    specs: list[tuple[str, str, list[int], list[int], list[dict[str, Any]]]] = [
        ("index-end", u16, [9, 13], [4, 6], [sharding([2, 3], [le])]),
        ("index-start", u16, [9, 13], [4, 6], [sharding([2, 3], [le], location="start")]),
        ("index-start-no-crc32c", u16, [9, 13], [4, 6],
         [sharding([2, 3], [le], [le], location="start")]),
        ("index-end-no-crc32c", u16, [9, 13], [4, 6], [sharding([2, 3], [le], [le])]),
        ("index-big-endian", "float32", [9, 13], [4, 6],
         [sharding([2, 3], [le], [bytes_codec("big"), CRC32C])]),
        ("inner-zstd", "float32", [9, 13], [4, 6], [sharding([2, 3], [le, zstd(3)])]),
        ("inner-blosc-start", "int64", [9, 13], [4, 6],
         [sharding([2, 3], [le, blosc("lz4", 5, "shuffle", 8)], location="start")]),
        ("inner-transpose-gzip", "int32", [9, 13], [4, 6],
         [sharding([2, 3], [transpose([1, 0]), bytes_codec("big"), gzip(4)])]),
        ("inner-crc32c", "uint8", [9, 13], [4, 6], [sharding([2, 3], [bytes_codec(None), CRC32C])]),
        ("nested", u16, [17, 25], [8, 12],
         [sharding([4, 6], [sharding([2, 3], [le])], location="start")]),
        ("nested-3d-compressed", "float64", [5, 9, 7], [4, 8, 6],
         [sharding([2, 4, 3], [sharding([1, 2, 3], [le, gzip(2)], location="start")])]),
        ("one-inner-chunk", "int32", [9, 13], [4, 6], [sharding([4, 6], [le])]),
        ("edge-only", "int32", [3, 5], [4, 6], [sharding([2, 3], [le])]),
        ("rank1", "complex128", [100], [40], [sharding([8], [bytes_codec("big")])]),
        ("rank4", "int8", [3, 4, 5, 6], [2, 4, 4, 6],
         [sharding([1, 2, 2, 3], [bytes_codec(None)], location="start")]),
        ("bool", "bool", [9, 13], [4, 6], [sharding([2, 3], [bytes_codec(None), gzip(1)])]),
    ]
    for name, dt, shape, chunks, codecs in specs:
        yield Case(f"shard-{name}", array_json(dt, shape, chunks, codecs, FILLS[dt]))
    # transpose before sharding: the shard is transposed, so the inner chunk shape is too
    # (TensorStore agrees; zarr-python 3.1.6 checks it against the untransposed shard).
    yield Case("shard-after-transpose", array_json(
        "float32", [9, 13], [4, 6], [transpose([1, 0]), sharding([3, 2], [le])], FILLS["float32"]),
        zarr_python=False)
    # Bytes codecs after sharding are valid Zarr v3; TensorStore refuses them.
    for name, after in (("crc32c", CRC32C), ("zstd", zstd(2))):
        yield Case(f"shard-then-{name}",
                   array_json(u16, [9, 13], [4, 6], [sharding([2, 3], [le]), after], 7),
                   tensorstore=False)


def _fill_cases() -> Iterator[Case]:
    le = bytes_codec("little")
    specs: list[tuple[str, str, Any, Any]] = [
        ("float32-nan", "float32", "NaN", "0x7fc00001"),
        ("float32-nan-payload", "float32", "0x7fc00001", "NaN"),
        ("float32-signalling-nan", "float32", "0x7f800001", "NaN"),
        ("float64-nan-payload", "float64", "0x7ff8000000000001", "NaN"),
        ("float16-nan-payload", "float16", "0x7e01", "NaN"),
        ("bfloat16-nan-payload", "bfloat16", "0x7fc1", "NaN"),
        ("float32-negative-zero", "float32", -0.0, 0.0),
        ("float64-zero", "float64", 0.0, -0.0),
        ("float16-negative-zero", "float16", -0.0, 0.0),
        ("float32-infinity", "float32", "Infinity", None),
        ("float64-minus-infinity", "float64", "-Infinity", None),
        ("float32-hex-number", "float32", "0x3f800000", None),
        ("complex64-nan", "complex64", ["NaN", 1.0], ["0x7fc00001", 1.0]),
        ("complex128-hex-nan", "complex128", ["0x7ff8000000000001", -0.0],
         ["0x7ff8000000000001", 0.0]),
        ("int64-min", "int64", -(2**63), None),
        ("uint64-max", "uint64", 2**64 - 1, None),
        ("int4-min", "int4", -8, None),
        ("int8-min", "int8", -128, None),
        ("bool-false", "bool", False, None),
    ]
    # zarr-python 3.1.6 quiets a signalling NaN fill and drops a float16 NaN payload.
    zarr_python_fails = {"float32-signalling-nan", "float16-nan-payload"}
    for name, dt, fill, lookalike in specs:
        zp = dt in ZARR_PYTHON_DTYPES and name not in zarr_python_fails
        yield Case(f"fill-{name}", array_json(dt, [5, 7], [2, 3], [default_bytes(dt)], fill),
                   zarr_python=zp, lookalike=lookalike)
    for name, dt, fill, lookalike in (
        ("float32-nan-payload", "float32", "0x7fc00001", "NaN"),
        ("float64-negative-zero", "float64", -0.0, 0.0),
    ):
        codecs = [sharding([2, 3], [le, zstd(1)])]
        yield Case(f"fill-{name}-sharded", array_json(dt, [9, 13], [4, 6], codecs, fill),
                   lookalike=lookalike)


def _shape_cases() -> Iterator[Case]:
    le = bytes_codec("little")
    yield Case("rank0", array_json("float64", [], [], [le], 2.5))
    yield Case("rank0-gzip-big-endian", array_json("int32", [], [], [bytes_codec("big"), gzip(5)],
                                                   -1))
    # (zarr-python 3.1.6 fails on rank-0 shards.)
    yield Case("rank0-sharded", array_json("float32", [], [], [sharding([], [le])], 0),
               zarr_python=False)
    yield Case("rank1", array_json("int16", [10], [3], [le], 0))
    yield Case("rank3", array_json("uint32", [4, 5, 6], [3, 2, 4], [le, zstd(1)], 0,
                                   dimension_names=["z", None, "x"]))
    yield Case("rank4", array_json("uint8", [3, 2, 4, 5], [2, 2, 3, 2], [bytes_codec(None)], 1))
    yield Case("rank5-sharded", array_json(
        "float32", [2, 3, 2, 3, 3], [2, 2, 2, 2, 2],
        [sharding([1, 2, 1, 2, 1], [le, gzip(1)])], 0))
    yield Case("zero-size", array_json("float32", [0, 4], [2, 3], [le], 0))
    yield Case("chunk-larger-than-array", array_json("int32", [3, 4], [8, 8], [le], 5))
    yield Case("chunk-of-one", array_json("int16", [3, 4], [1, 1], [le, gzip(1)], 0))
    yield Case("dimension-names", array_json("uint16", [4, 6], [3, 4], [le], 0,
                                             dimension_names=["y", "x"]))


def all_cases() -> list[Case]:
    cases = [
        *_dtype_cases(), *_codec_cases(), *_key_cases(), *_sharding_cases(), *_fill_cases(),
        *_shape_cases(),
    ]
    ids = [c.id for c in cases]
    assert len(ids) == len(set(ids)), "case ids must be unique"
    return cases


CASES = all_cases()
