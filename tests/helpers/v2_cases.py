"""The cases of the Zarr v2 interop matrix (tests/interop/test_v2_matrix_*.py) and the values
written in them.

Every case covers a few features at once (data type and byte order, compressor or filter,
order, dimension separator, fill value form, edge chunks, a missing chunk), so that each
feature shows up a few times without the full cross product.
"""

from __future__ import annotations

import base64
import itertools
import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numcodecs
import numpy as np

# -- cases -----------------------------------------------------------------------------------


class _Default:
    """Let zarr-python choose the fill value."""

    def __repr__(self) -> str:
        return "DEFAULT"


DEFAULT: Any = _Default()
UNCHECKED: Any = object()  # the fill_value JSON is not asserted


@dataclass(frozen=True)
class Spec:
    id: str
    dtype: Any  # anything np.dtype() takes: typestr or list of fields
    shape: tuple[int, ...] = (5, 7)
    chunks: tuple[int, ...] = (2, 3)
    compressor: Any = None  # a numcodecs codec, or None
    filters: tuple[Any, ...] = ()
    order: str = "C"
    separator: str = "."
    fill: Any = DEFAULT  # the fill value given to zarr-python (None: JSON null)
    fill_json: Any = UNCHECKED  # what zarr-python must write as "fill_value"
    values: str = "bits"  # "bits": random bit patterns; "normal": finite floats; "f4": f4-exact
    written: bool = True  # False: no chunk is ever written
    tensorstore: bool = True  # TensorStore's zarr driver can write it
    tensorstore_defaults: bool = False  # only TensorStore writes it, with its own defaults

    @property
    def np_dtype(self) -> np.dtype[Any]:
        return np.dtype(self.dtype)

    def grid(self) -> list[tuple[int, ...]]:
        counts = [-(-s // c) for s, c in zip(self.shape, self.chunks, strict=True)]
        return list(itertools.product(*(range(n) for n in counts)))

    def key(self, index: Sequence[int]) -> str:
        return self.separator.join(map(str, index)) if index else "0"

    def region(self, index: Sequence[int]) -> tuple[slice, ...]:
        return tuple(slice(i * c, min((i + 1) * c, s))
                     for i, c, s in zip(index, self.chunks, self.shape, strict=True))


NC = numcodecs
BLOSC_LZ4 = NC.Blosc(cname="lz4", clevel=5, shuffle=NC.Blosc.SHUFFLE)
STRUCT = [("a", "<i2"), ("b", ">f8"), ("c", "|S3")]
NESTED = [("x", "|u1"), ("y", [("p", ">i4"), ("q", "|S2")]), ("z", "<u2")]

DTYPE_SPECS = [
    Spec("b1-zlib", "|b1", compressor=NC.Zlib(level=1), fill=True, fill_json=True),
    Spec("i1-rank1-none", "|i1", shape=(9,), chunks=(4,), fill=-5, fill_json=-5),
    Spec("u1-lzma", "|u1", compressor=NC.LZMA(preset=1), fill=255, fill_json=255, tensorstore=False),
    Spec("i2-le-gzip-F-slash", "<i2", compressor=NC.GZip(level=2), order="F", separator="/",
         fill=0, fill_json=0),
    Spec("i2-be-zstd", ">i2", compressor=NC.Zstd(level=3), fill=-7, fill_json=-7),
    Spec("i4-be-rank3-blosc-F-slash", ">i4", shape=(4, 5, 6), chunks=(3, 2, 4), compressor=BLOSC_LZ4,
         order="F", separator="/", fill=3, fill_json=3),
    Spec("i8-le-bz2-min-fill", "<i8", compressor=NC.BZ2(level=3), fill=-(2**63), fill_json=-(2**63)),
    Spec("u2-be-zlib-F", ">u2", compressor=NC.Zlib(level=5), order="F", fill=65535, fill_json=65535),
    Spec("u4-le-slash", "<u4", separator="/", fill=7, fill_json=7),
    Spec("u8-be-lz4-max-fill", ">u8", compressor=NC.LZ4(acceleration=1), fill=2**64 - 1,
         fill_json=2**64 - 1, tensorstore=False),
    Spec("f2-le-nan", "<f2", fill=math.nan, fill_json="NaN"),
    Spec("f2-be-minus-infinity-gzip", ">f2", compressor=NC.GZip(level=1), fill=-math.inf,
         fill_json="-Infinity"),
    Spec("f4-le-number-slash", "<f4", separator="/", fill=2.5, fill_json=2.5),
    Spec("f4-be-infinity-zstd-F", ">f4", compressor=NC.Zstd(level=1), order="F", fill=math.inf,
         fill_json="Infinity"),
    Spec("f8-le-null-zlib", "<f8", compressor=NC.Zlib(level=1), fill=None, fill_json=None),
    Spec("f8-be-nan-blosc-slash", ">f8", compressor=BLOSC_LZ4, separator="/", fill=math.nan,
         fill_json="NaN"),
    Spec("c8-le-nan", "<c8", fill=complex(math.nan, 1.0), fill_json=["NaN", 1.0]),
    Spec("c16-be-bz2-F", ">c16", compressor=NC.BZ2(level=1), order="F", fill=complex(0.5, -1.5),
         fill_json=[0.5, -1.5]),
    Spec("M8s-number-fill", "<M8[s]", fill=np.datetime64(5, "s"), fill_json=5, tensorstore=False),
    Spec("M8ns-be-default-fill-F", ">M8[ns]", order="F", fill_json=-(2**63), tensorstore=False),
    # (not null: zarr-python reads a null fill of M8/m8 as NaT, the contract says zero)
    Spec("m8ms-negative-lz4-slash", "<m8[ms]", compressor=NC.LZ4(acceleration=1), separator="/",
         fill=np.timedelta64(-1, "ms"), fill_json=-1, tensorstore=False),
    Spec("S6-short-base64", "|S6", compressor=NC.Zstd(level=1), fill=b"abc", fill_json="YWJj",
         tensorstore=False),  # TensorStore wants all 6 bytes in the base64
    Spec("S6-null-F", "|S6", order="F", fill=None, fill_json=None),
    Spec("U3-le-string-fill", "<U3", fill="ab", fill_json="ab", tensorstore=False),
    Spec("U3-be-default-fill-F", ">U3", order="F", fill_json="", tensorstore=False),
    Spec("V4-base64-slash", "|V4", separator="/", fill=b"\x01\x02\x03\x04", fill_json="AQIDBA=="),
    Spec("struct-base64-zlib", STRUCT, compressor=NC.Zlib(level=1), fill=(3, 1.5, b"xy"),
         fill_json="AwA/+AAAAAAAAHh5AA=="),
    Spec("struct-null-F", [("a", ">u4"), ("b", "<f4")], order="F", fill=None, fill_json=None),
    Spec("struct-nested-base64", NESTED, compressor=NC.GZip(level=1), fill=(1, (2, b"ab"), 9),
         fill_json=base64.b64encode(b"\x01\x00\x00\x00\x02ab\x09\x00").decode(), tensorstore=False),
]

FILTER_SPECS = [
    Spec("filter-delta-zlib", "<i4", filters=(NC.Delta(dtype="<i4"),), compressor=NC.Zlib(level=1),
         fill=0, tensorstore=False),
    Spec("filter-fixedscaleoffset", "<f8",
         filters=(NC.FixedScaleOffset(offset=1, scale=10, dtype="<f8", astype="<i2"),),
         values="normal", fill=0.0, tensorstore=False),
    Spec("filter-quantize-zstd", "<f4", filters=(NC.Quantize(digits=2, dtype="<f4"),),
         compressor=NC.Zstd(level=1), values="normal", fill=0.0, tensorstore=False),
    # (order "C": with "F", zarr-python 3.1.6 stores BitRound's output in C order and reads it
    # back as F, so it does not read back what it wrote)
    Spec("filter-bitround", "<f4", filters=(NC.BitRound(keepbits=5),), values="normal", fill=0.0,
         tensorstore=False),
    Spec("filter-packbits", "|b1", filters=(NC.PackBits(),), fill=False, tensorstore=False),
    Spec("filter-shuffle-be-slash", ">i8", filters=(NC.Shuffle(elementsize=8),),
         compressor=NC.Zstd(level=1), separator="/", fill=-1, tensorstore=False),
    Spec("filter-astype-gzip", "<f8", filters=(NC.AsType(encode_dtype="<f4", decode_dtype="<f8"),),
         compressor=NC.GZip(level=1), values="f4", fill=0.0, tensorstore=False),
]

SHAPE_SPECS = [
    Spec("rank0-zstd", "<f8", shape=(), chunks=(), compressor=NC.Zstd(level=1), fill=1.5,
         fill_json=1.5),
    Spec("rank0-missing-be", ">i2", shape=(), chunks=(), fill=-3, fill_json=-3, written=False),
    Spec("chunk-larger-than-array", "<u2", shape=(3,), chunks=(5,), fill=9, fill_json=9),
    Spec("rank3-edges-missing", "<f4", shape=(3, 5, 4), chunks=(2, 2, 3), separator="/",
         compressor=BLOSC_LZ4, fill=math.nan, fill_json="NaN"),
]

# TensorStore's defaults: blosc lz4 with "shuffle": -1 (automatic: bit shuffle for 1-byte
# types, byte shuffle otherwise), "fill_value": null, compact JSON, no .zattrs.
TENSORSTORE_DEFAULT_SPECS = [
    Spec("ts-defaults-u2", "<u2", tensorstore_defaults=True),
    Spec("ts-defaults-i1-F-slash", "|i1", order="F", separator="/", tensorstore_defaults=True),
]

ALL_SPECS = (*DTYPE_SPECS, *FILTER_SPECS, *SHAPE_SPECS, *TENSORSTORE_DEFAULT_SPECS)
SPECS = {s.id: s for s in ALL_SPECS}
assert len(SPECS) == len(ALL_SPECS), "ids must be unique"
TENSORSTORE_SPECS = [s.id for s in SPECS.values() if s.tensorstore]

# -- values ----------------------------------------------------------------------------------

_CODE_POINTS = np.array([0, 0x41, 0x7A, 0x20, 0xE9, 0x3A9, 0x4E2D, 0x1F600], dtype=np.uint32)


def random_values(dtype: np.dtype[Any], shape: tuple[int, ...], rng: np.random.Generator,
                  how: str = "bits") -> np.ndarray:
    n = math.prod(shape)
    if dtype.names:
        out = np.zeros(shape, dtype=dtype)
        for name in dtype.names:
            out[name] = random_values(dtype.fields[name][0], shape, rng, how)  # type: ignore[index]
        return out
    if dtype.kind == "b":
        return rng.integers(0, 2, n).astype(bool).reshape(shape)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, n, dtype=dtype.newbyteorder("="),
                            endpoint=True).astype(dtype).reshape(shape)
    if dtype.kind == "U":
        units = _CODE_POINTS[rng.integers(0, len(_CODE_POINTS), n * (dtype.itemsize // 4))]
        return units.astype(dtype.byteorder.replace("|", "=") + "u4").view(dtype).reshape(shape)
    if dtype.kind in "fc" and how != "bits":
        parts = rng.normal(0, 100, n * (2 if dtype.kind == "c" else 1))
        if how == "f4":
            parts = parts.astype(np.float32).astype(np.float64)
        if dtype.kind == "c":
            parts = parts.view(np.complex128)
        return parts.astype(dtype).reshape(shape)
    raw = rng.integers(0, 256, n * dtype.itemsize, dtype=np.uint8)
    return raw.view(dtype).reshape(shape).copy()


def model(spec: Spec) -> np.ndarray:
    """What the writers write: random, some elements equal to the fill value, the first chunk
    all fill (its key is removed from the store afterwards: a missing chunk)."""
    rng = np.random.default_rng(zlib.crc32(spec.id.encode()))
    data = random_values(spec.np_dtype, spec.shape, rng, spec.values)
    fill = python_fill(spec)
    if fill is not None and data.size > 1:
        data.reshape(-1)[-1] = fill
    if len(spec.grid()) > 1:
        data[spec.region(spec.grid()[0])] = fill if fill is not None else np.zeros((), spec.np_dtype)
    return data


def python_fill(spec: Spec) -> Any:
    if spec.fill is DEFAULT or spec.fill is None:
        return None
    if spec.np_dtype.names:
        return np.array(spec.fill, dtype=spec.np_dtype)[()]
    return spec.fill
