"""The Zarr v2 interop matrix: arrays written by zarr-python 3 (`zarr_format=2`) and by
TensorStore's `zarr` driver, mounted with zarrfs, compared with each writer's own reading.

Every case covers a few features at once (data type and byte order, compressor or filter,
order, dimension separator, fill value form, edge chunks, a missing chunk), so that each
feature shows up a few times without the full cross product. The oracle is the writer's own
reading, converted to the flat view of the contract (C order, little-endian unless
`-o endian=big`); the fill value is decoded here from the stored `.zarray`, independently of
zarrfs, and checked against what the writer reads in its missing chunk.

Reads: most arrays are mounted directly as SOURCE (one mount each); every array of both
writers is also read through one mount of a v2 group, and a few through a consolidated group
and with `-o endian=big`. Writes (rw mounts): elements and an unaligned run of bytes through
`data`, a whole chunk file, a chunk set to the fill value through a memory map; then the
writers read the new values exactly, the all-fill chunk is gone from the store and the
metadata files are unchanged.
"""

from __future__ import annotations

import base64
import dataclasses
import itertools
import json
import math
import os
import shutil
import tempfile
import warnings
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np
import pytest
import tensorstore as ts
import zarr

from tests.helpers.mounting import Mount, mounted

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
    fill = _python_fill(spec)
    if fill is not None and data.size > 1:
        data.reshape(-1)[-1] = fill
    if len(spec.grid()) > 1:
        data[spec.region(spec.grid()[0])] = fill if fill is not None else np.zeros((), spec.np_dtype)
    return data


def _python_fill(spec: Spec) -> Any:
    if spec.fill is DEFAULT or spec.fill is None:
        return None
    if spec.np_dtype.names:
        return np.array(spec.fill, dtype=spec.np_dtype)[()]
    return spec.fill


# -- writers and readers ---------------------------------------------------------------------


def write_zarr_python(spec: Spec, path: str) -> np.ndarray:
    """Create and write the array; zarr-python's own reading of it, the first chunk dropped
    (read through the array it created: zarr-python 3.1 cannot reopen nested structured v2
    arrays)."""
    kwargs: dict[str, Any] = {}
    if spec.fill is not DEFAULT:
        kwargs["fill_value"] = _python_fill(spec)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        array = zarr.create_array(
            store=path, shape=spec.shape, chunks=spec.chunks, dtype=spec.np_dtype, zarr_format=2,
            compressors=spec.compressor, filters=list(spec.filters) or None, order=spec.order,
            chunk_key_encoding={"name": "v2", "separator": spec.separator},
            attributes={"case": spec.id, "writer": "zarr-python"}, **kwargs)
        if spec.written:
            array[...] = model(spec)
        _drop_first_chunk(spec, path)
        return np.asarray(array[...])


def write_tensorstore(spec: Spec, path: str, metadata: dict[str, Any]) -> None:
    """TensorStore writes the same metadata (the .zarray zarr-python wrote for the case)."""
    data = model(spec)
    base = {"driver": "zarr", "kvstore": {"driver": "file", "path": path}}
    create = {"metadata": metadata, "create": True}
    dtype = spec.np_dtype
    if dtype.names:
        for i, name in enumerate(dtype.names):
            part = ts.open({**base, "field": name, **(create if i == 0 else {})}).result()
            if spec.written:
                part[...] = _to_tensorstore(data[name])
    else:
        array = ts.open({**base, **create}).result()
        if spec.written:
            array[...] = _to_tensorstore(data)
    _drop_first_chunk(spec, path)


def _to_tensorstore(values: np.ndarray) -> np.ndarray:
    """S<n> and V<n> are arrays of chars or bytes with an extra dimension in TensorStore."""
    values = np.array(values, order="C")
    if values.dtype.kind == "S":
        return values.view("S1").reshape(*values.shape, values.dtype.itemsize)
    if values.dtype.kind == "V":
        return values.view(np.uint8).reshape(*values.shape, values.dtype.itemsize)
    return values.astype(values.dtype.newbyteorder("="))


def _drop_first_chunk(spec: Spec, path: str) -> None:
    if len(spec.grid()) > 1:
        with_key = os.path.join(path, spec.key(spec.grid()[0]))
        if os.path.exists(with_key):
            os.remove(with_key)
        assert not os.path.exists(with_key)


def read_zarr_python(path: str | Path) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.asarray(zarr.open_array(str(path), mode="r")[...])


def tensorstore_can_read(dtype: np.dtype[Any]) -> bool:
    """TensorStore's Python binding returns char and byte arrays with a zero itemsize."""
    if dtype.names:
        return all(tensorstore_can_read(dtype.fields[n][0]) for n in dtype.names)  # type: ignore[index]
    return dtype.kind not in "SVUMm"


def read_tensorstore(path: str | Path, dtype: np.dtype[Any]) -> np.ndarray:
    base = {"driver": "zarr", "kvstore": {"driver": "file", "path": str(path)}}
    if not dtype.names:
        return np.asarray(ts.open(base).result().read().result())
    parts = {name: np.asarray(ts.open({**base, "field": name}).result().read().result())
             for name in dtype.names}
    out = np.zeros(next(iter(parts.values())).shape, dtype=dtype)
    for name, part in parts.items():
        out[name] = part
    return out


# -- the flat view and the fill value ----------------------------------------------------------


def flat(values: np.ndarray, endian: str = "<") -> bytes:
    """The contract's flat view: C order, every (field's) byte order `endian`."""
    values = np.asarray(values)
    return values.astype(values.dtype.newbyteorder(endian)).tobytes(order="C")


def decode_fill(fill_json: Any, dtype: np.dtype[Any]) -> np.ndarray:
    """The fill value (a 0-d array) from the .zarray JSON, decoded without zarrfs."""
    if fill_json is None:
        return np.zeros((), dtype=dtype)
    if dtype.kind == "V" or dtype.kind == "S":  # structured, V<n>, S<n>: base64 bytes
        raw = base64.b64decode(fill_json)
        assert len(raw) <= dtype.itemsize, f"fill value {fill_json!r} too long for {dtype}"
        return np.frombuffer(raw.ljust(dtype.itemsize, b"\0"), dtype=dtype).reshape(())

    def number(value: Any) -> Any:
        return {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}.get(value, value)

    if dtype.kind == "c":
        return np.array(complex(number(fill_json[0]), number(fill_json[1])), dtype=dtype)
    if dtype.kind in "Mm":
        native = dtype.newbyteorder("=")
        return np.array(int(fill_json), dtype=np.int64).view(native).astype(dtype)
    return np.array(number(fill_json), dtype=dtype)


def expected_chunk(spec: Spec, written: np.ndarray, fill: np.ndarray, index: Sequence[int]) -> np.ndarray:
    chunk = np.full(spec.chunks, fill, dtype=spec.np_dtype)
    region = spec.region(index)
    chunk[tuple(slice(0, r.stop - r.start) for r in region)] = written[region]
    return chunk


def assert_same_bytes(actual: bytes, expected: bytes, dtype: np.dtype[Any], shape: tuple[int, ...],
                      what: str) -> None:
    assert len(actual) == len(expected), f"{what}: {len(actual)} bytes, expected {len(expected)}"
    if actual == expected:
        return
    size = dtype.itemsize
    a = np.frombuffer(actual, np.uint8).reshape(-1, size)
    e = np.frombuffer(expected, np.uint8).reshape(-1, size)
    wrong = np.flatnonzero((a != e).any(axis=1))
    first = int(wrong[0])
    where = tuple(int(i) for i in np.unravel_index(first, shape)) if shape else ()
    raise AssertionError(
        f"{what}: {wrong.size} of {len(e)} elements differ; first at {where}: "
        f"got {a[first].tobytes().hex()}, expected {e[first].tobytes().hex()} ({dtype})")


# -- the checks on one mounted array -----------------------------------------------------------


def _stored_metadata(store: Path) -> dict[str, bytes]:
    return {name: (store / name).read_bytes() for name in (".zarray", ".zattrs")
            if (store / name).exists()}


def check_array(spec: Spec, store: Path, root: Path, written: np.ndarray, endian: str = "<") -> None:
    """Everything a read-only mount of `store` at `root` must show."""
    metadata = _stored_metadata(store)
    fill = decode_fill(json.loads(metadata[".zarray"])["fill_value"], spec.np_dtype)
    missing = spec.grid()[0] if len(spec.grid()) > 1 or not spec.written else None
    if missing is not None:  # the oracle agrees with our decoding of the fill value
        region = written[spec.region(missing)]
        assert flat(region) == flat(np.full(region.shape, fill)), "writer's fill != decoded fill"

    # (header files for legacy tools, `data.npy` and the like, are issue 10's: not checked here)
    listed = [name for name in os.listdir(root) if not name.startswith("data.")]
    assert sorted(listed) == sorted([*metadata, "chunks", "data"]), f"listing of {root}"
    for name, content in metadata.items():
        assert (root / name).read_bytes() == content, f"{name} differs from the stored file"

    flat_dtype = spec.np_dtype.newbyteorder(endian)
    data = (root / "data").read_bytes()
    assert_same_bytes(data, flat(written, endian), flat_dtype, spec.shape, "data")
    assert os.stat(root / "data").st_size == math.prod(spec.shape) * spec.np_dtype.itemsize

    keys = [spec.key(index) for index in spec.grid()]
    assert sorted(os.listdir(root / "chunks")) == sorted({k.split("/")[0] for k in keys})
    for index, key in zip(spec.grid(), keys, strict=True):
        stored = (store / key).exists()
        if index == missing:
            assert not stored, f"chunk {key} should be missing (oracle setup)"
        chunk = expected_chunk(spec, written, fill, index)
        assert_same_bytes((root / "chunks" / key).read_bytes(), flat(chunk, endian), flat_dtype,
                          spec.chunks, f"chunk file {key}{'' if stored else ' (missing)'}")


# -- reads: arrays mounted as SOURCE ----------------------------------------------------------

# Mounted one by one (a mount costs about a second): every data type, compressor, filter kind,
# order, separator and fill value form at least once. Every case is also read in the group below.
DIRECT = [
    "b1-zlib", "i1-rank1-none", "u1-lzma", "i2-le-gzip-F-slash", "i2-be-zstd",
    "i4-be-rank3-blosc-F-slash", "i8-le-bz2-min-fill", "u8-be-lz4-max-fill", "f2-le-nan",
    "f2-be-minus-infinity-gzip", "f4-be-infinity-zstd-F", "f8-le-null-zlib", "c8-le-nan",
    "M8ns-be-default-fill-F", "m8ms-negative-lz4-slash", "S6-short-base64", "S6-null-F",
    "U3-le-string-fill", "U3-be-default-fill-F", "V4-base64-slash", "struct-base64-zlib",
    "struct-nested-base64", *(s.id for s in FILTER_SPECS), "rank0-zstd", "rank0-missing-be",
    "chunk-larger-than-array",
]


def check_zarr_python_metadata(spec: Spec, store: Path) -> None:
    """The metadata zarr-python wrote is the form the case is meant to cover."""
    zarray = json.loads((store / ".zarray").read_bytes())
    if spec.fill_json is not UNCHECKED:
        assert zarray["fill_value"] == spec.fill_json
    assert zarray["order"] == spec.order and zarray["dimension_separator"] == spec.separator


@pytest.mark.parametrize("case", DIRECT)
def test_zarr_python_array(case: str, scratch: Path, mount_array: Any) -> None:
    spec = SPECS[case]
    store = scratch / "array"
    written = write_zarr_python(spec, str(store))
    check_zarr_python_metadata(spec, store)
    mount = mount_array(store, options=("ro",))
    check_array(spec, store, mount.path, written)


def _zarray_for(spec: Spec) -> dict[str, Any]:
    """The metadata zarr-python writes for the case, for TensorStore to write too."""
    if spec.tensorstore_defaults:
        return {"shape": list(spec.shape), "chunks": list(spec.chunks), "dtype": spec.np_dtype.str,
                "order": spec.order, "dimension_separator": spec.separator}
    with tempfile.TemporaryDirectory(dir=_scratch_root()) as where:
        path = os.path.join(where, "a")
        write_zarr_python(dataclasses.replace(spec, written=False), path)
        with open(os.path.join(path, ".zarray")) as f:
            return dict(json.load(f))


def _scratch_root() -> str | None:
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


def _tensorstore_oracle(spec: Spec, path: Path) -> np.ndarray:
    if tensorstore_can_read(spec.np_dtype):
        seen = read_tensorstore(path, spec.np_dtype)
        assert flat(seen) == flat(read_zarr_python(path)), "TensorStore and zarr-python disagree"
        return seen
    return read_zarr_python(path)


@pytest.mark.parametrize("case", ["i4-be-rank3-blosc-F-slash", "struct-null-F",
                                  "ts-defaults-i1-F-slash"])
def test_tensorstore_array(case: str, scratch: Path, mount_array: Any) -> None:
    spec = SPECS[case]
    store = scratch / "array"
    write_tensorstore(spec, str(store), _zarray_for(spec))
    written = _tensorstore_oracle(spec, store)
    mount = mount_array(store, options=("ro",))
    check_array(spec, store, mount.path, written)


def test_stored_overhang_reads_as_fill(scratch: Path, mount_array: Any) -> None:
    """Edge chunks written by hand with other values than the fill value past the array's edge
    (v2 stores edge chunks full size; what is stored there is not part of the array)."""
    spec = Spec("hand-written-overhang", ">i2", shape=(3, 5), chunks=(2, 4), order="F",
                compressor=NC.Zlib(level=1), fill=7)
    store = scratch / "array"
    store.mkdir()
    (store / ".zarray").write_text(json.dumps({
        "zarr_format": 2, "shape": [3, 5], "chunks": [2, 4], "dtype": ">i2", "order": "F",
        "compressor": {"id": "zlib", "level": 1}, "fill_value": 7, "filters": None}, indent=2))
    rng = np.random.default_rng(5)
    for key in ("0.1", "1.0", "1.1"):  # "0.0" missing
        values = rng.integers(100, 30000, (2, 4)).astype(">i2")
        (store / key).write_bytes(spec.compressor.encode(values.tobytes(order="F")))
    written = read_zarr_python(store)
    mount = mount_array(store, options=("ro",))
    check_array(spec, store, mount.path, written)


# -- reads: every array of both writers in one v2 group -----------------------------------------

ZGROUP = '{\n  "zarr_format": 2\n}'
WRITERS = ("zarr-python", "tensorstore")
IN_GROUP = [(w, c) for w in WRITERS for c, s in SPECS.items()
            if (s.tensorstore if w == "tensorstore" else not s.tensorstore_defaults)]


@dataclass
class Group:
    store: Path
    mount: Mount
    written: dict[tuple[str, str], np.ndarray]


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Group]:
    """/ (with attributes), /zarr-python/<case> and /tensorstore/<case>, mounted once."""
    store = Path(tempfile.mkdtemp(prefix="zarrfs-v2-group-", dir=_scratch_root()))
    try:
        (store / ".zgroup").write_text(ZGROUP)
        (store / ".zattrs").write_text('{"matrix": "v2"}')
        for writer in WRITERS:
            (store / writer).mkdir()
            (store / writer / ".zgroup").write_text(ZGROUP)
        written = {}
        for writer, case in IN_GROUP:
            spec, path = SPECS[case], store / writer / case
            if writer == "zarr-python":
                written[writer, case] = write_zarr_python(spec, str(path))
                check_zarr_python_metadata(spec, path)
            else:
                write_tensorstore(spec, str(path), _zarray_for(spec))
                written[writer, case] = _tensorstore_oracle(spec, path)
        with mounted(store, tmp_path_factory.mktemp("v2group") / "mnt", ("ro",)) as mount:
            yield Group(store, mount, written)
    finally:
        shutil.rmtree(store, ignore_errors=True)


def test_group_lists_its_nodes(group: Group) -> None:
    root = group.mount.path
    assert sorted(os.listdir(root)) == sorted([".zattrs", ".zgroup", "data.h5", "data.nc", *WRITERS])
    for name in (".zattrs", ".zgroup", "zarr-python/.zgroup", "tensorstore/.zgroup"):
        assert (root / name).read_bytes() == (group.store / name).read_bytes()
    for writer in WRITERS:
        cases = [c for w, c in IN_GROUP if w == writer]
        assert sorted(os.listdir(root / writer)) == sorted([".zgroup", "data.h5", "data.nc", *cases])


@pytest.mark.parametrize(("writer", "case"), IN_GROUP, ids=[f"{w}-{c}" for w, c in IN_GROUP])
def test_array_in_group(writer: str, case: str, group: Group) -> None:
    check_array(SPECS[case], group.store / writer / case, group.mount.path / writer / case,
                group.written[writer, case])


def _expected_xattrs(spec: Spec, store: Path) -> dict[str, Any]:
    view = spec.np_dtype.newbyteorder("<")
    attributes = json.loads((store / ".zattrs").read_bytes()) if (store / ".zattrs").exists() else {}
    return {
        "user.zarr.shape": ",".join(map(str, spec.shape)),
        "user.zarr.chunks": ",".join(map(str, spec.chunks)),
        "user.zarr.dtype": json.loads(json.dumps(view.descr)) if view.names else view.str,
        "user.zarr.dimension_names": None,
        "user.zarr.attributes": attributes,
    }


def test_xattrs_in_group(group: Group) -> None:
    """The extended attributes of every array directory and its data file in the group."""
    wrong = []
    for writer, case in IN_GROUP:
        spec, root = SPECS[case], group.mount.path / writer / case
        for name, value in _expected_xattrs(spec, group.store / writer / case).items():
            for path in (root, root / "data"):
                raw = os.getxattr(path, name).decode()
                seen = raw if name in ("user.zarr.shape", "user.zarr.chunks") or (
                    name == "user.zarr.dtype" and not spec.np_dtype.names) else json.loads(raw)
                if seen != value:
                    wrong.append(f"{writer}/{case}{'/data' if path != root else ''} {name}: "
                                 f"{raw!r}, expected {value!r}")
    assert not wrong, "\n".join(wrong)


def test_consolidated_group(scratch: Path, mount_array: Any) -> None:
    """A group with `.zmetadata` (zarr-python's consolidate_metadata): still the stored bytes of
    every metadata file (the stored .zarray files are indented, .zmetadata holds them compact)."""
    store = scratch / "group"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zarr.open_group(str(store), mode="w", zarr_format=2, attributes={"consolidated": True})
        zarr.open_group(str(store / "sub"), mode="w", zarr_format=2)
    arrays = {"struct-base64-zlib": "struct", "S6-short-base64": "s6",
              "i4-be-rank3-blosc-F-slash": "rank3", "f8-be-nan-blosc-slash": "sub/ts"}
    written = {}
    for case, name in arrays.items():
        if name.startswith("sub/"):
            write_tensorstore(SPECS[case], str(store / name), _zarray_for(SPECS[case]))
            written[name] = _tensorstore_oracle(SPECS[case], store / name)
        else:
            written[name] = write_zarr_python(SPECS[case], str(store / name))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zarr.consolidate_metadata(str(store))
    assert json.loads((store / ".zmetadata").read_bytes())["metadata"]["s6/.zarray"]
    mount = mount_array(store, options=("ro",))
    views = ["data.h5", "data.nc"]
    names = [".zattrs", ".zgroup", ".zmetadata", *views, "rank3", "s6", "struct", "sub"]
    assert sorted(os.listdir(mount.path)) == sorted(names)
    assert sorted(os.listdir(mount.path / "sub")) == sorted([*os.listdir(store / "sub"), *views])
    for name in (".zattrs", ".zgroup", ".zmetadata", "sub/.zgroup"):
        assert (mount.path / name).read_bytes() == (store / name).read_bytes(), name
    for case, name in arrays.items():
        check_array(SPECS[case], store / name, mount.path / name, written[name])


# -- big-endian flat view ------------------------------------------------------------------------


@pytest.mark.parametrize("case", ["struct-base64-zlib", "U3-le-string-fill"])
def test_endian_big(case: str, scratch: Path, mount_array: Any) -> None:
    spec = SPECS[case]
    store = scratch / "array"
    written = write_zarr_python(spec, str(store))
    mount = mount_array(store, options=("ro", "endian=big"))
    check_array(spec, store, mount.path, written, endian=">")


# -- writes --------------------------------------------------------------------------------------

WRITE_CASES = [
    ("i2-be-zstd", "zarr-python", "<"),
    ("i4-be-rank3-blosc-F-slash", "zarr-python", "<"),
    ("u8-be-lz4-max-fill", "zarr-python", "<"),
    ("u1-lzma", "zarr-python", "<"),
    ("f8-le-null-zlib", "zarr-python", "<"),
    ("c16-be-bz2-F", "zarr-python", ">"),
    ("S6-short-base64", "zarr-python", "<"),
    ("U3-be-default-fill-F", "zarr-python", "<"),
    ("struct-base64-zlib", "zarr-python", "<"),
    ("filter-delta-zlib", "zarr-python", "<"),
    ("filter-packbits", "zarr-python", "<"),
    ("filter-astype-gzip", "zarr-python", "<"),
    ("filter-fixedscaleoffset", "zarr-python", "<"),
    ("f8-be-nan-blosc-slash", "tensorstore", "<"),
    ("struct-null-F", "tensorstore", ">"),
    ("ts-defaults-i1-F-slash", "tensorstore", "<"),
]
LOSSY = (NC.FixedScaleOffset, NC.Quantize, NC.BitRound)


def kept(spec: Spec, values: np.ndarray) -> np.ndarray:
    """What the array keeps of written values: lossy filters round them (element by element, and
    rounding again changes nothing)."""
    for codec in spec.filters:
        if isinstance(codec, LOSSY):
            decoded = codec.decode(codec.encode(np.ascontiguousarray(values)))
            values = np.asarray(decoded, dtype=values.dtype).reshape(values.shape)
    return values


def _check_store(spec: Spec, store: Path, expected: np.ndarray, when: str) -> None:
    seen = read_zarr_python(store)
    assert_same_bytes(flat(seen), flat(expected), spec.np_dtype, spec.shape, f"zarr-python {when}")
    if spec.tensorstore and tensorstore_can_read(spec.np_dtype):
        seen = read_tensorstore(store, spec.np_dtype)
        assert_same_bytes(flat(seen), flat(expected), spec.np_dtype, spec.shape, f"TensorStore {when}")


@pytest.mark.parametrize(("case", "writer", "endian"), WRITE_CASES,
                         ids=[f"{c}-{w}{'-endian-big' if e == '>' else ''}" for c, w, e in WRITE_CASES])
def test_write(case: str, writer: str, endian: str, scratch: Path, mount_array: Any) -> None:
    spec = SPECS[case]
    store = scratch / "array"
    if writer == "tensorstore":
        write_tensorstore(spec, str(store), _zarray_for(spec))
    else:
        write_zarr_python(spec, str(store))
    before = _stored_metadata(store)
    expected = np.array(read_zarr_python(store), order="C")  # a copy, reshape(-1) is a view
    fill = decode_fill(json.loads(before[".zarray"])["fill_value"], spec.np_dtype)
    grid = spec.grid()
    assert len(grid) >= 3, "a write case needs a missing, a filled and a rewritten chunk"
    missing, to_fill, rewritten = grid[0], grid[len(grid) // 2], grid[-1]
    assert (store / spec.key(to_fill)).exists(), "the chunk to fill must be stored at first"
    assert not (store / spec.key(missing)).exists(), "the first chunk must be missing at first"
    flat_dtype = spec.np_dtype.newbyteorder(endian)
    rng = np.random.default_rng(zlib.crc32(f"write-{case}".encode()))
    options = ["rw"] if endian == "<" else ["rw", "endian=big"]
    mount = mount_array(store, options=options)

    # Some elements through data with pwrite (one in the missing chunk), then fsync.
    new = random_values(spec.np_dtype, (5,), rng, spec.values)
    points = [0, *rng.choice(expected.size, 4, replace=False).tolist()]
    fd = os.open(mount.data, os.O_WRONLY)
    try:
        for i, point in enumerate(points):
            element = flat(new[i : i + 1], endian)
            assert os.pwrite(fd, element, point * spec.np_dtype.itemsize) == len(element)
            expected.reshape(-1)[point] = kept(spec, new[i : i + 1])[0]
        if not any(isinstance(codec, LOSSY) for codec in spec.filters):
            # A run of bytes across chunks, starting and ending inside elements: what is not
            # written of an element keeps its bytes.
            size = spec.np_dtype.itemsize
            start, stop = size * spec.chunks[-1] - size // 2, size * (expected.size - 1) - 1
            raw = bytearray(flat(expected, endian))
            raw[start:stop] = flat(random_values(spec.np_dtype, spec.shape, rng, spec.values),
                                   endian)[start:stop]
            assert os.pwrite(fd, bytes(raw[start:stop]), start) == stop - start
            expected = np.frombuffer(bytes(raw), dtype=flat_dtype).reshape(spec.shape).copy()
        os.fsync(fd)
    finally:
        os.close(fd)
    _check_store(spec, store, expected, "after fsync() of data")

    # One whole (edge) chunk file, then close.
    chunk = random_values(spec.np_dtype, spec.chunks, rng, spec.values)
    key = spec.key(rewritten)
    with open(mount.path / "chunks" / key, "r+b") as f:  # fixed size: no O_TRUNC
        f.write(flat(chunk, endian))
    region = spec.region(rewritten)
    inside = tuple(slice(0, r.stop - r.start) for r in region)
    expected[region] = kept(spec, chunk)[inside]
    if not any(isinstance(codec, LOSSY) for codec in spec.filters):
        # Read back: the overhang past the array's edge reads as the fill value.
        assert_same_bytes((mount.path / "chunks" / key).read_bytes(),
                          flat(expected_chunk(spec, expected, fill, rewritten), endian), flat_dtype,
                          spec.chunks, f"chunk file {key} read back")
    _check_store(spec, store, expected, f"after close() of chunk file {key}")

    # One stored chunk set to the fill value through a memory map of data.
    region = spec.region(to_fill)
    view = np.memmap(mount.data, dtype=flat_dtype, mode="r+", shape=spec.shape)
    view[region] = fill
    view.flush()
    del view
    expected[region] = fill

    status = mount.unmount()
    assert status == 0, f"zarrfs exited with {status}:\n{mount.log()}"
    assert _stored_metadata(store) == before, "metadata files changed"
    assert not (store / spec.key(to_fill)).exists(), "a chunk all fill value is still stored"
    if flat(expected[spec.region(rewritten)]) != flat(np.full(chunk[inside].shape, fill)):
        assert (store / key).exists(), f"the rewritten chunk {key} is not stored"
    _check_store(spec, store, expected, "after unmount")


def test_write_rank0(scratch: Path, mount_array: Any) -> None:
    spec = SPECS["rank0-zstd"]  # <f8, fill 1.5
    store = scratch / "array"
    write_zarr_python(spec, str(store))
    before = _stored_metadata(store)
    assert (store / "0").exists()
    mount = mount_array(store, options=("rw",))
    fd = os.open(mount.data, os.O_WRONLY)
    try:
        assert os.pwrite(fd, flat(np.array(-0.25)), 0) == 8
        os.fsync(fd)
        _check_store(spec, store, np.array(-0.25), "after fsync() of data")
        assert os.pwrite(fd, flat(np.array(1.5)), 0) == 8  # the fill value
    finally:
        os.close(fd)
    assert mount.unmount() == 0, mount.log()
    assert _stored_metadata(store) == before, "metadata files changed"
    assert not (store / "0").exists(), "a chunk all fill value is still stored"
    _check_store(spec, store, np.array(1.5), "after unmount")
