"""Zarr v3 beyond the core: the extension data types and the `numcodecs.*` codecs, as
zarr-python 3.1 writes them (`zarr.create_array` with numpy dtypes and
`zarr.codecs.numcodecs.*` codecs), read and written through a real mount.

The oracle is zarr-python itself: what it reads from the store is what `data` and the chunk
files must hold, and what zarrfs writes back must read, through zarr-python, exactly as the
same writes made through zarr-python on a copy of the store. The forms zarr-python 3.1 writes
look like `{"name": "numpy.datetime64", "configuration": {"unit": "s", "scale_factor": 1}}`,
`{"name": "fixed_length_utf32", "configuration": {"length_bytes": 20}}`, `{"name": "structured",
"configuration": {"fields": [["a", "int32"], ...]}}` and, for codecs, `{"name":
"numcodecs.delta", "configuration": {"dtype": "<i4"}}` (configuration: only the arguments
given, so often `{}`); `test_zarr_python_writes_the_recorded_forms` pins them down.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
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


def _random(dtype: np.dtype, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Random values of any (possibly structured) dtype, field by field."""
    n = math.prod(shape)
    if dtype.names:
        out = np.zeros(n, dtype=dtype)
        for name in dtype.names:
            out[name] = _random(dtype.fields[name][0], (n,), rng)
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
        make = case.values or _random
        half = case.shape[0] // 2
        array[half:] = make(case.np_dtype, (case.shape[0] - half, *case.shape[1:]),
                            np.random.default_rng(seed))
    return read_zarr(path)


def stored_keys(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*") if p.is_file() and p.name != "zarr.json"}


def little(dtype: np.dtype) -> np.dtype:
    return dtype.newbyteorder("<")


def fill_of(path: Path) -> np.ndarray:
    arr = open_zarr(path)
    return np.asarray(arr.fill_value, dtype=arr.dtype)


def chunk_grid(case: ExtCase, path: Path) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(grid chunk shape, grid shape): the shard shape for sharded arrays."""
    arr = open_zarr(path)
    chunks = tuple(arr.shards or arr.chunks)
    return chunks, tuple(-(-s // c) for s, c in zip(case.shape, chunks, strict=True))


def expected_chunk(whole: np.ndarray, fill: np.ndarray, chunks: tuple[int, ...],
                   index: tuple[int, ...]) -> bytes:
    block = np.full(chunks, fill, dtype=whole.dtype)
    part = whole[tuple(slice(i * c, (i + 1) * c) for i, c in zip(index, chunks, strict=True))]
    block[tuple(slice(0, n) for n in part.shape)] = part
    return block.astype(little(whole.dtype)).tobytes()


def differing(a: bytes, b: bytes, itemsize: int) -> str:
    """Where two equally typed buffers first differ, for messages."""
    if len(a) != len(b):
        return f"sizes {len(a)} != {len(b)}"
    x = np.frombuffer(a, np.uint8).reshape(-1, itemsize)
    y = np.frombuffer(b, np.uint8).reshape(-1, itemsize)
    bad = np.nonzero((x != y).any(axis=1))[0]
    if not len(bad):
        return "equal"
    first = bad[0]
    return (f"{len(bad)} of {len(x)} elements differ, first at flat index {first}: "
            f"{x[first].tobytes().hex()} != {y[first].tobytes().hex()}")


Stored = tuple[str, ExtCase, Path, np.ndarray]


def _stored(name: str, scratch: Path) -> Stored:
    case = CASES[name]
    path = scratch / "array.zarr"
    return name, case, path, create(path, case)


BIG_ENDIAN_CASES = ["dtype-datetime64-10ms-big-endian", "dtype-timedelta64-D-fill",
                    "dtype-U3-fill-big-endian", "dtype-S6-short-fill", "dtype-V3-fill",
                    "dtype-structured-fill"]


@pytest.fixture(params=sorted(CASES))
def case_store(request: pytest.FixtureRequest, scratch: Path) -> Stored:
    return _stored(request.param, scratch)


def _key(index: tuple[int, ...]) -> str:
    return "c/" + "/".join(map(str, index))


def _cell(index: tuple[int, ...], chunks: tuple[int, ...]) -> tuple[slice, ...]:
    return tuple(slice(i * c, (i + 1) * c) for i, c in zip(index, chunks, strict=True))


# -- what zarr-python writes -----------------------------------------------------------------


def test_zarr_python_writes_the_recorded_forms(case_store: Stored) -> None:
    name, case, path, whole = case_store
    doc = json.loads((path / "zarr.json").read_text())
    assert whole.dtype == case.np_dtype
    if case.name_in_json is None:
        return
    if name.startswith("dtype-"):
        assert doc["data_type"] == case.name_in_json, json.dumps(doc["data_type"])
    else:
        names = [c["name"] for c in doc["codecs"]]
        assert case.name_in_json["name"] in names, json.dumps(doc["codecs"])


# -- reading and writing through a mount -----------------------------------------------------


def check_reads(mount: Any, case: ExtCase, path: Path, whole: np.ndarray) -> list[str]:
    """What `data`, the chunk files, zarr.json and the dtype xattr must hold: problems found."""
    problems = []
    if (mount.path / "zarr.json").read_bytes() != (path / "zarr.json").read_bytes():
        problems.append("zarr.json differs from the stored bytes")
    dtype = whole.dtype
    expected = whole.astype(little(dtype)).tobytes()
    got = mount.data.read_bytes()
    if got != expected:
        problems.append(f"data: {differing(got, expected, dtype.itemsize)}")
    fill = fill_of(path)
    chunks, grid = chunk_grid(case, path)
    for index in np.ndindex(*grid):
        got = mount.chunk(_key(index)).read_bytes()
        want = expected_chunk(whole, fill, chunks, index)
        if got != want:
            problems.append(f"chunk file {_key(index)}: {differing(got, want, dtype.itemsize)}")
    try:
        got_dtype = os.getxattr(mount.data, "user.zarr.dtype").decode()
    except OSError as e:
        problems.append(f"user.zarr.dtype: {e}")
    else:
        if dtype.names:
            if [tuple(f) for f in json.loads(got_dtype)] != little(dtype).descr:
                problems.append(f"user.zarr.dtype {got_dtype} != {little(dtype).descr}")
        elif got_dtype != little(dtype).str:
            problems.append(f"user.zarr.dtype {got_dtype} != {little(dtype).str}")
    return problems


def test_reads_and_writes_match_zarr_python(case_store: Stored, mount_array: Any, scratch: Path) -> None:
    """One rw mount per case (to keep the run short).

    Reads: zarr.json as stored; `data` and every chunk file as zarr-python reads the array
    (chunk files: fill past the edge and for unwritten chunks); `user.zarr.dtype`.

    Writes: a run of elements through `data` (in the unwritten first chunk row, across chunk
    columns), the last (edge) chunk whole through its chunk file with new values, and chunk
    (1, 0) through its chunk file all fill value. After unmounting: zarr.json unchanged, chunk
    (1, 0) deleted from the store, and zarr-python reads exactly what it reads from a copy of
    the store given the same writes through zarr-python (lossy filters quantize alike)."""
    _, case, path, whole = case_store
    twin = scratch / "twin.zarr"
    shutil.copytree(path, twin)
    meta_before = (path / "zarr.json").read_bytes()
    dtype = whole.dtype
    fill = fill_of(path)
    chunks, grid = chunk_grid(case, path)
    fresh = (case.values or _random)(dtype, case.shape, np.random.default_rng(7))
    mount = mount_array(path)
    problems = check_reads(mount, case, path, whole)

    target = whole.copy()
    width = case.shape[-1]
    start, stop = width + 2, 3 * width + 4  # rows 1-3 (chunk row 0, never written)
    target.reshape(-1)[start:stop] = fresh.reshape(-1)[start:stop]
    with open(mount.data, "r+b") as f:
        f.seek(start * dtype.itemsize)
        f.write(fresh.reshape(-1)[start:stop].astype(little(dtype)).tobytes())
    last = tuple(g - 1 for g in grid)
    target[_cell(last, chunks)] = fresh[_cell(last, chunks)][..., ::-1]
    with open(mount.chunk(_key(last)), "r+b") as f:
        f.write(expected_chunk(target, fill, chunks, last))
    emptied = (1, *(0,) * (len(grid) - 1))
    assert emptied != last and _key(emptied) in stored_keys(path)
    target[_cell(emptied, chunks)] = fill
    with open(mount.chunk(_key(emptied)), "r+b") as f:
        f.write(np.full(chunks, fill, dtype=dtype).astype(little(dtype)).tobytes())
    assert mount.unmount() == 0

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        open_zarr(twin, mode="r+")[...] = target
    if (path / "zarr.json").read_bytes() != meta_before:
        problems.append("zarr.json was changed by writing")
    if _key(emptied) in stored_keys(path):
        problems.append(f"{_key(emptied)} written all fill value is still stored")
    try:
        got, want = read_zarr(path), read_zarr(twin)
    except Exception as e:
        problems.append(f"zarr-python cannot read the array after the writes: {type(e).__name__}: {e}")
    else:
        if got.tobytes() != want.tobytes():
            problems.append("after writes, zarr-python reads: "
                            + differing(got.tobytes(), want.tobytes(), dtype.itemsize))
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("name", BIG_ENDIAN_CASES)
def test_big_endian_view(name: str, scratch: Path, mount_array: Any) -> None:
    _, _case, path, whole = _stored(name, scratch)
    mount = mount_array(path, options=("ro", "endian=big"))
    expected = whole.astype(whole.dtype.newbyteorder(">")).tobytes()
    got = mount.data.read_bytes()
    assert got == expected, differing(got, expected, whole.dtype.itemsize)


# -- r* (raw bits): the core spec's form, which zarr-python 3.1 does not write ----------------


def test_raw_bits_r24_reads_and_writes_like_raw_bytes(scratch: Path, mount_array: Any) -> None:
    """`"data_type": "r24"` with an integer-list fill value: the same bytes as the raw_bytes
    array zarr-python wrote (zarr-python cannot open r*, so the metadata is swapped back to
    check the write)."""
    case = DTYPE_CASES["V3-fill"]
    path = scratch / "r24.zarr"
    whole = create(path, case)
    raw_bytes_meta = (path / "zarr.json").read_bytes()
    doc = json.loads(raw_bytes_meta)
    doc["data_type"] = "r24"
    doc["fill_value"] = [1, 2, 3]
    (path / "zarr.json").write_text(json.dumps(doc, indent=2))
    r24_meta = (path / "zarr.json").read_bytes()

    mount = mount_array(path)
    assert mount.data.read_bytes() == whole.tobytes()
    assert mount.chunk("c/0/0").read_bytes() == b"\x01\x02\x03" * math.prod(CHUNKS)
    assert os.getxattr(mount.data, "user.zarr.dtype") == b"|V3"
    new = np.frombuffer(bytes(range(30)), dtype="V3")
    with open(mount.data, "r+b") as f:
        f.seek(3 * 14)
        f.write(new.tobytes())
    assert mount.unmount() == 0
    assert (path / "zarr.json").read_bytes() == r24_meta
    (path / "zarr.json").write_bytes(raw_bytes_meta)
    expected = whole.copy()
    expected.reshape(-1)[14:24] = new
    assert read_zarr(path).tobytes() == expected.tobytes()
