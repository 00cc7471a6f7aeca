"""The cases of the Zarr v3 extension tests (tests/interop/test_v3_extensions_*.py): the extension
data types and the `numcodecs.*` codecs as zarr-python 3.1 writes them, and zarr-python as
the oracle (what it reads from the store, the fill value, the chunks it stores).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import zarr
import zarr.codecs.numcodecs as nc
from zarr.codecs import BytesCodec

# -- cases -----------------------------------------------------------------------------------

SHAPE = (9, 13)
CHUNKS = (4, 5)


@dataclass
class ExtCase:
    dtype: Any
    kwargs: dict[str, Any] = field(default_factory=dict)  # for zarr.create_array
    shape: tuple[int, ...] = SHAPE
    chunks: tuple[int, ...] = CHUNKS
    values: Callable[[np.dtype, tuple[int, ...], np.random.Generator], np.ndarray] | None = None
    name_in_json: Any = None  # expected `data_type` or codec name, checked in zarr.json
    write_back: bool = True

    @property
    def np_dtype(self) -> np.dtype:
        return np.dtype(self.dtype)


def random_values(dtype: np.dtype, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Random values of any (possibly structured) dtype, field by field."""
    n = math.prod(shape)
    if dtype.names:
        out = np.zeros(n, dtype=dtype)
        for name in dtype.names:
            out[name] = random_values(dtype.fields[name][0], (n,), rng)
        return out.reshape(shape)
    if dtype.kind == "b":
        v = rng.integers(0, 2, n).astype(bool)
    elif dtype.kind in "iu":
        info = np.iinfo(dtype)
        v = rng.integers(info.min, info.max, n, endpoint=True, dtype=dtype)
    elif dtype.kind in "fc":
        v = (rng.normal(size=n) * 100).astype(dtype)
        if dtype.kind == "c":
            v = v + (1j * rng.normal(size=n)).astype(dtype)
    elif dtype.kind in "Mm":
        v = rng.integers(-(10**12), 10**12, n).astype("<i8")
        v[::7] = np.iinfo(np.int64).min  # NaT
        v = v.view(dtype.newbyteorder("<")).astype(dtype)
    elif dtype.kind == "U":
        alphabet = list("abcxyzé€\u00ff\U0001f600 ")
        v = np.array(["".join(rng.choice(alphabet, rng.integers(0, dtype.itemsize // 4 + 1)))
                      for _ in range(n)], dtype=dtype)
    elif dtype.kind == "S":
        v = np.array([bytes(rng.integers(1, 256, rng.integers(0, dtype.itemsize + 1)).astype(np.uint8))
                      for _ in range(n)], dtype=dtype)
    elif dtype.kind == "V":
        v = np.frombuffer(rng.integers(0, 256, n * dtype.itemsize).astype(np.uint8).tobytes(), dtype=dtype)
    else:
        raise AssertionError(dtype)
    return np.asarray(v).reshape(shape)


def _small_ints(dtype: np.dtype, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    return rng.integers(-3000, 3000, math.prod(shape)).astype(dtype).reshape(shape)


def _smooth_floats(dtype: np.dtype, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Floats within FixedScaleOffset(offset=1000, scale=10, astype=u2)'s range."""
    return (1000 + rng.uniform(0, 6000, math.prod(shape))).astype(dtype).reshape(shape)


def _ramp(dtype: np.dtype, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Mostly increasing integers, what Delta is for (wraps in int32 are fine)."""
    return np.cumsum(rng.integers(-5, 50, math.prod(shape))).astype(dtype).reshape(shape)


def _dt(unit: str, scale: int = 1, kind: str = "datetime64") -> dict[str, Any]:
    return {"name": f"numpy.{kind}", "configuration": {"unit": unit, "scale_factor": scale}}


STRUCT = [("a", "<i4"), ("b", "<f8"), ("c", "S3")]

_constructing = warnings.catch_warnings()
_constructing.__enter__()
warnings.simplefilter("ignore", UserWarning)  # "Numcodecs codecs are not in the Zarr v3 spec"

DTYPE_CASES: dict[str, ExtCase] = {
    "datetime64-s": ExtCase("datetime64[s]", name_in_json=_dt("s")),
    "datetime64-ns-fill-2020": ExtCase("datetime64[ns]", {"fill_value": np.datetime64("2020-01-01", "ns")},
                                       name_in_json=_dt("ns")),
    "datetime64-10ms-big-endian": ExtCase("datetime64[10ms]", {"serializer": BytesCodec(endian="big")},
                                          name_in_json=_dt("ms", 10)),
    "timedelta64-ms": ExtCase("timedelta64[ms]", name_in_json=_dt("ms", kind="timedelta64")),
    "timedelta64-D-fill": ExtCase("timedelta64[D]", {"fill_value": np.timedelta64(-3, "D")},
                                  name_in_json=_dt("D", kind="timedelta64")),
    "U5": ExtCase("<U5", name_in_json={"name": "fixed_length_utf32", "configuration": {"length_bytes": 20}}),
    "U3-fill-big-endian": ExtCase("<U3", {"fill_value": "hé", "serializer": BytesCodec(endian="big")},
                                  name_in_json={"name": "fixed_length_utf32",
                                                "configuration": {"length_bytes": 12}}),
    "S6": ExtCase("|S6", name_in_json={"name": "null_terminated_bytes",
                                       "configuration": {"length_bytes": 6}}),
    "S6-short-fill": ExtCase("|S6", {"fill_value": b"ab"}),
    "V3": ExtCase("|V3", name_in_json={"name": "raw_bytes", "configuration": {"length_bytes": 3}}),
    "V3-fill": ExtCase("|V3", {"fill_value": b"\x01\x02\x03"}),
    "structured-default-fill": ExtCase(STRUCT, name_in_json={"name": "structured", "configuration": {
        "fields": [["a", "int32"], ["b", "float64"],
                   ["c", {"name": "null_terminated_bytes", "configuration": {"length_bytes": 3}}]]}}),
    "structured-fill": ExtCase(STRUCT, {"fill_value": np.array((1, 2.5, b"ab"), dtype=STRUCT)[()]}),
    "structured-datetime-field": ExtCase([("t", "<M8[ms]")]),
    "structured-U-field-zlib": ExtCase([("u", "<U2")], {"compressors": [nc.Zlib(level=2)]}),
    "structured-i8-f2": ExtCase([("i", "<i8"), ("f", "<f2")]),
    "structured-bool-c8-blosc": ExtCase([("b", "?"), ("c", "<c8")],
                                        {"compressors": [nc.Blosc(cname="lz4", clevel=3, shuffle=1)]}),
}


def _codec(name: str) -> dict[str, Any]:
    return {"name": name}


CODEC_CASES: dict[str, ExtCase] = {
    "delta": ExtCase("int32", {"filters": [nc.Delta(dtype="<i4")], "compressors": None}, values=_ramp,
                     name_in_json=_codec("numcodecs.delta")),
    "delta-astype-i2-zstd": ExtCase("int32", {"filters": [nc.Delta(dtype="<i4", astype="<i2")]},
                                    values=_small_ints),
    "fixedscaleoffset": ExtCase("float64", {"filters": [nc.FixedScaleOffset(
        offset=1000, scale=10, dtype="<f8", astype="<u2")], "compressors": None, "fill_value": 1000.0},
        values=_smooth_floats, name_in_json=_codec("numcodecs.fixedscaleoffset")),
    "quantize": ExtCase("float64", {"filters": [nc.Quantize(digits=3, dtype="<f8")], "compressors": None},
                        name_in_json=_codec("numcodecs.quantize")),
    # Not here: Quantize(astype="float16"): zarr-python 3.1.6 cannot read back what it writes with
    # it (the bytes codec expects the array's float32), so there is no oracle.
    "bitround": ExtCase("float32", {"filters": [nc.BitRound(keepbits=8)], "compressors": None},
                        name_in_json=_codec("numcodecs.bitround")),
    "packbits": ExtCase("bool", {"filters": [nc.PackBits()], "compressors": None},
                        name_in_json=_codec("numcodecs.packbits")),
    "astype-f8-f4": ExtCase("float64", {"filters": [nc.AsType(encode_dtype="<f4", decode_dtype="<f8")],
                                        "compressors": None}, name_in_json=_codec("numcodecs.astype")),
    "shuffle": ExtCase("int32", {"compressors": [nc.Shuffle()]}, name_in_json=_codec("numcodecs.shuffle")),
    "zlib": ExtCase("int32", {"compressors": [nc.Zlib(level=3)]}, name_in_json=_codec("numcodecs.zlib")),
    "zlib-defaults": ExtCase("uint16", {"compressors": [nc.Zlib()]}),
    "bz2": ExtCase("int32", {"compressors": [nc.BZ2(level=5)]}, name_in_json=_codec("numcodecs.bz2")),
    "lzma": ExtCase("int32", {"compressors": [nc.LZMA(preset=1)]}, name_in_json=_codec("numcodecs.lzma")),
    "lzma-defaults": ExtCase("float64", {"compressors": [nc.LZMA()]}),
    "lz4": ExtCase("int64", {"compressors": [nc.LZ4(acceleration=1)]}, name_in_json=_codec("numcodecs.lz4")),
    "fletcher32": ExtCase("int32", {"compressors": [nc.Fletcher32()]},
                          name_in_json=_codec("numcodecs.fletcher32")),
    "crc32": ExtCase("int32", {"compressors": [nc.CRC32()]}, name_in_json=_codec("numcodecs.crc32")),
    "crc32c": ExtCase("int32", {"compressors": [nc.CRC32C()]}, name_in_json=_codec("numcodecs.crc32c")),
    "adler32": ExtCase("int32", {"compressors": [nc.Adler32()]}, name_in_json=_codec("numcodecs.adler32")),
    "jenkins-lookup3": ExtCase("int32", {"compressors": [nc.JenkinsLookup3()]},
                               name_in_json=_codec("numcodecs.jenkins_lookup3")),
    "blosc": ExtCase("int32", {"compressors": [nc.Blosc(cname="zstd", clevel=3, shuffle=2)]},
                     name_in_json=_codec("numcodecs.blosc")),
    "blosc-defaults": ExtCase("float32", {"compressors": [nc.Blosc()]}),
    "zstd": ExtCase("int32", {"compressors": [nc.Zstd(level=2)]}, name_in_json=_codec("numcodecs.zstd")),
    "zstd-defaults-checksum": ExtCase("int16", {"compressors": [nc.Zstd(level=1, checksum=True)]}),
    "gzip": ExtCase("int32", {"compressors": [nc.GZip(level=2)]}, name_in_json=_codec("numcodecs.gzip")),
    "delta-shuffle-zlib-crc32": ExtCase("uint32", {
        "filters": [nc.Delta(dtype="<u4")],
        "compressors": [nc.Shuffle(elementsize=4), nc.Zlib(level=1), nc.CRC32()]}, values=_ramp),
    "big-endian-bz2-adler32": ExtCase("int64", {"serializer": BytesCodec(endian="big"),
                                                "compressors": [nc.BZ2(level=1), nc.Adler32()]}),
    "sharded-inner-delta-lz4": ExtCase("int32", {"shards": (8, 10), "filters": [nc.Delta(dtype="<i4")],
                                                 "compressors": [nc.LZ4()]}, values=_ramp),
    "datetime64-delta-zlib": ExtCase("datetime64[s]", {"filters": [nc.Delta(dtype="<i8")],
                                                       "compressors": [nc.Zlib(level=1)]}),
    "U4-lzma": ExtCase("<U4", {"compressors": [nc.LZMA(preset=0)]}),
}

_constructing.__exit__(None, None, None)

CASES = {**{f"dtype-{k}": v for k, v in DTYPE_CASES.items()},
         **{f"codec-{k}": v for k, v in CODEC_CASES.items()}}


# -- zarr-python, the oracle -----------------------------------------------------------------


def open_zarr(path: Path, mode: str = "r") -> zarr.Array:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return zarr.open_array(str(path), mode=mode)


def read_zarr(path: Path) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.asarray(open_zarr(path)[...])


def create(path: Path, case: ExtCase, seed: int = 0) -> np.ndarray:
    """Create the case's array with zarr-python and write its second half along axis 0 (the
    chunks of the first rows stay unwritten); return what zarr-python reads back."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        array = zarr.create_array(store=str(path), shape=case.shape, chunks=case.chunks,
                                  dtype=case.np_dtype, **case.kwargs)
        make = case.values or random_values
        half = case.shape[0] // 2
        array[half:] = make(case.np_dtype, (case.shape[0] - half, *case.shape[1:]),
                            np.random.default_rng(seed))
    return read_zarr(path)
