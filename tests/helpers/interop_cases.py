"""The interop matrix: Zarr v3 arrays described as `zarr.json` documents, a deterministic
model of their contents, and one writer and reader per implementation (TensorStore,
zarr-python, zarrfs).
The data types are interop_values.py's, the documents interop_docs.py's, a case and its model
interop_model.py's, the writers and readers interop_io.py's; the matrix of cases (`CASES`) is
here.

Everything the tests compare against is computed here without zarrfs: fill values, chunk
keys and shard indexes are decoded independently, so a zarrfs bug cannot hide in the oracle.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

from tests.helpers.interop_docs import (
    CRC32C,
    array_json,
    blosc,
    bytes_codec,
    default_bytes,
    gzip,
    sharding,
    transpose,
    zstd,
)
from tests.helpers.interop_model import Case
from tests.helpers.interop_values import DATA_TYPES, STORAGE, ZARR_PYTHON_DTYPES

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
