"""`data.h5` through real mounts, read by readers of HDF5 1.8's format that know nothing of
HDF5 1.10's: the HDF5 1.8.18 library (h5py 2.7.1 on Python 3.6, in .venv-hdf5-1.8), pyfive
(pure Python) and jsfive (pure JavaScript, on node); scripts/install installs them.

Each reader's program (tests/hdf5_old_readers/) writes every dataset of a file it reads:
name, shape, type, chunks, fill value, attributes and values. The values are compared with
zarr-python's reading of the array; the rest with h5py 3's reading of the same file (modern
HDF5). Zarr v2 and v3 arrays of 1 to 3 dimensions with edge chunks, a scalar, integers,
floats (NaN, infinities), bool, strings (variable-length, numpy `U`, `S` bytes), chunks
passed through as stored (zlib, shuffle + zlib, zlib + fletcher32) or decoded by the mount
(gzip's header, no compression), chunks never written (the fill value), in the group's
data.h5, a subgroup's and each array's own; one array over S3; one chunk of an array of 10^6
chunks; zstd chunks, which the default mount serves decoded (none of these readers has
the plugin). A file HDF5 itself wrote with zstd chunks: its metadata alone is compared.

What each reader does that the comparison allows for (each program's comments say more):
pyfive 1.3 fails on a chunk the index does not hold (its program fills such chunks with the
dataset's fill value as pyfive reads it), jsfive 0.4.2 leaves their elements undefined
(likewise filled), as it does a dataset with no storage (a dimension without a variable),
and reads 64-bit integers as doubles; h5py 2.7.1 reads fixed-length strings of UTF-8 (the
attributes' text) only through its low-level API. (data.h5's index holds every chunk, one
never written pointing at a chunk of fill values; HDF5's own files leave them out, as the
last test's file shows.)
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fsspec
import h5py
import hdf5plugin  # (zstd: h5py 3 reads the zstd datasets, and writes one in the HDF5 1.8 file)
import numcodecs
import numpy as np
import pytest
import zarr
import zarr.codecs.numcodecs

from tests.hdf5_old_readers import read_h5
from tests.helpers.mounting import mounted
from tests.helpers.s3_server import S3Server, free_port, serving
from tests.helpers.scale_arrays import ZLIB, write_twin
from tests.views.hdf5.test_hdf5_strings import named, string_array, strings

# (numcodecs' codecs in Zarr v3, and `U` and `S` in v3: not in its specification, zarr-python warns)
pytestmark = [pytest.mark.filterwarnings("ignore::UserWarning"),
              pytest.mark.filterwarnings("ignore::zarr.errors.UnstableSpecificationWarning")]

REPO = Path(__file__).resolve().parents[3]
PROGRAMS = REPO / "tests" / "hdf5_old_readers"
OLD_PYTHON = REPO / ".venv-hdf5-1.8" / "bin" / "python"
JSFIVE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "zarrfs" / "jsfive"
READERS = ["hdf5-1.8", "pyfive", "jsfive"]
TIMEOUT = 300  # (seconds a reader may take on one file: minutes on a loaded machine, not hours)
# Attributes of object references: each reader shows references its own way.
REFERENCES = {"DIMENSION_LIST", "REFERENCE_LIST"}
# What the readers say of a chunk they have no filter for (zstd, 32015).
NO_FILTER = re.compile(r"32015|plugin|filter", re.IGNORECASE)

Reading = dict[str, Any]  # read_h5's JSON: {"reader": ..., "datasets": {name: {...}}}


# -- the readers ----------------------------------------------------------------------------


def run_reader(reader: str, path: Path, out: Path, *extra: str) -> Reading:
    """Every dataset of `path` as `reader` reads it (read_h5's form); AssertionError with the
    reader's output if it fails on the file as a whole. Skips when the reader is not
    installed (bash scripts/install installs them)."""
    if reader == "pyfive":
        pyfive = pytest.importorskip("pyfive")
        try:
            with pyfive.File(str(path)) as opened:
                found: Reading = read_h5.dump(opened, f"pyfive {pyfive.__version__}", np)
                return found
        except Exception as e:
            raise AssertionError(f"pyfive failed to read {path}: {type(e).__name__}: {e}") from e
    if reader == "hdf5-1.8":
        if not OLD_PYTHON.exists():
            pytest.skip(f"no {OLD_PYTHON} (bash scripts/install makes it when it finds a Python 3.6)")
        # (HDF5 1.8 would load plugins built for h5py 3's HDF5 from hdf5plugin's directory)
        env = {k: v for k, v in os.environ.items() if k != "HDF5_PLUGIN_PATH"}
        command = [str(OLD_PYTHON), str(PROGRAMS / "read_h5.py"), str(path), str(out), *extra]
    else:
        if not (JSFIVE / "node_modules" / "jsfive" / "package.json").exists():
            pytest.skip(f"no jsfive in {JSFIVE} (bash scripts/install installs it)")
        env = dict(os.environ)
        command = ["node", str(PROGRAMS / "read_h5.cjs"), str(JSFIVE), str(path), str(out)]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=TIMEOUT)
    if done.returncode != 0:
        raise AssertionError(f"{reader} failed to read {path} (exit {done.returncode}):\n"
                             f"{done.stderr[-4000:]}{done.stdout[-2000:]}")
    found = json.loads(out.read_text())
    return found


def modern(path: Path) -> Reading:
    """The file as h5py 3 (today's HDF5) reads it: the metadata every reader must find."""
    with h5py.File(path, "r") as opened:
        found: Reading = read_h5.dump(opened, f"h5py {h5py.__version__}", np)
        return found


# -- what a reading must hold ---------------------------------------------------------------


@dataclass(frozen=True)
class Expected:
    """A dataset's values as zarr-python reads its array, in the form data.h5 holds them
    (bool as int8, `S` bytes as characters of one more dimension, strings as str); `values`
    None: its chunks are zstd as stored, which none of the readers decodes."""

    values: np.ndarray[Any, Any] | None
    kind: str  # "number", "text" (variable length) or "chars" (one byte each)


def as_held(values: np.ndarray[Any, Any]) -> tuple[np.ndarray[Any, Any], str]:
    """zarr-python's values of an array as data.h5 holds them, and their kind."""
    if values.dtype == bool:
        return values.astype(np.int8), "number"
    if values.dtype.kind == "S":
        width = values.dtype.itemsize
        return np.ascontiguousarray(values).view("S1").reshape((*values.shape, width)), "chars"
    if values.dtype.kind in "UO":
        return values.astype(object), "text"
    return values, "number"


def kind_of(dtype: Any) -> str:
    """A reader's type as one string: numpy's for numbers and bytes, "vlen-string" for
    variable-length strings (numpy's object type, jsfive's ["VLEN_STRING", ...])."""
    if isinstance(dtype, list):
        return "vlen-string" if dtype[0] == "VLEN_STRING" else f"vlen-{dtype[0]}"
    if dtype == "|O":
        return "vlen-string"
    return str(np.dtype(dtype).str)


def element(value: Any) -> Any:
    """One element of read_h5's JSON as Python holds it."""
    if isinstance(value, dict) and "bytes" in value:
        return bytes.fromhex(value["bytes"])
    if value in ("NaN", "Infinity", "-Infinity"):
        return float(value)
    return value


def numbers(values: list[Any], dtype: np.dtype[Any], reader: str) -> np.ndarray[Any, Any]:
    """Elements read of numbers of type `dtype`: exactly, except jsfive's 64-bit integers,
    which are JavaScript's doubles (as numpy rounds them to float64)."""
    decoded = [element(v) for v in values]
    if reader.startswith("jsfive") and dtype.kind in "iu" and dtype.itemsize == 8:
        return np.array(decoded, dtype=np.float64)
    return np.array(decoded, dtype=dtype)


def same_numbers(got: np.ndarray[Any, Any], wanted: np.ndarray[Any, Any]) -> bool:
    wanted = wanted.astype(got.dtype) if got.dtype == np.float64 else wanted
    return bool(np.array_equal(got, wanted, equal_nan=got.dtype.kind == "f"))


def text_problems(got: list[Any], wanted: list[Any], kind: str) -> list[str]:
    """How the strings a reader returned differ from `wanted`. Bytes from the reader are
    compared as bytes (a character's trailing NUL dropped, as numpy drops it), or decoded
    as UTF-8 for variable-length strings; str (jsfive) with the bytes decoded as jsfive's
    TextDecoder decodes them (an invalid byte as U+FFFD, a NUL kept)."""
    problems = []
    for i, (have, want) in enumerate(zip(got, wanted, strict=True)):
        if kind == "chars":
            same = have == want.rstrip(b"\0") if isinstance(have, bytes) else \
                have == want.decode("utf-8", "replace")
        else:
            want = want.decode() if isinstance(want, bytes) else want
            try:
                same = (have.decode() if isinstance(have, bytes) else have) == want
            except UnicodeDecodeError:
                same = False
        if not same:
            problems.append(f"element {i}: {have!r}, not {want!r}")
    return problems[:5]


def normal(value: Any) -> Any:
    """An attribute as readers differ in giving it: bytes as text, a fixed-length string's
    NUL padding dropped, a one-element array as its element, numbers as float (NaN as
    "NaN")."""
    value = element(value)
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if isinstance(value, str):
        return value.rstrip("\0")
    if isinstance(value, list):
        return normal(value[0]) if len(value) == 1 else [normal(v) for v in value]
    if isinstance(value, bool | int | float):
        return "NaN" if value != value else float(value)  # (NaN: equal to itself here)
    return value


def problems_of(found: Reading, wanted: Reading, expected: dict[str, Expected]) -> list[str]:
    """How a reader's reading of a file differs from h5py 3's (`wanted`: the datasets, their
    metadata, the values of those not in `expected`) and from `expected` (zarr-python's
    values of the arrays, by dataset name)."""
    reader, problems = found["reader"], []
    have_all, want_all = found["datasets"], wanted["datasets"]
    if sorted(have_all) != sorted(want_all):
        problems.append(f"datasets {sorted(have_all)}, not {sorted(want_all)}")
    if set(expected) - set(want_all):  # (an array the file should hold and does not: untested)
        problems.append(f"no dataset of {sorted(set(expected) - set(want_all))} in the file")
    for name in sorted(set(have_all) & set(want_all)):
        have, want = have_all[name], want_all[name]
        said = [f"{name}: {p}" for p in dataset_problems(reader, have, want, expected.get(name))]
        problems.extend(said)
    return problems


def dataset_problems(reader: str, have: dict[str, Any], want: dict[str, Any],
                     expected: Expected | None) -> list[str]:
    if have.get("shape") is None:  # (the reader could not open the dataset)
        return [f"not opened: {have['error']}"]
    problems = []
    for key in ("shape", "chunks"):
        if have[key] != want[key]:
            problems.append(f"{key} {have[key]}, not {want[key]}")
    if kind_of(have["dtype"]) != kind_of(want["dtype"]):
        problems.append(f"type {have['dtype']}, not {want['dtype']}")
    attrs = have["attrs"]
    if have.get("attrs_low_level"):  # (text in UTF-8 where it is ASCII: h5py 2 cannot read it)
        problems.append(f"attributes only its low-level API reads: {have['attrs_low_level']}")
    if "error" in attrs and isinstance(attrs["error"], str):
        problems.append(f"attributes: {attrs['error']}")
    else:
        got = {k: normal(v) for k, v in attrs.items() if k not in REFERENCES}
        wanted_attrs = {k: normal(v) for k, v in want["attrs"].items() if k not in REFERENCES}
        if got != wanted_attrs:
            problems.append(f"attributes {got}, not {wanted_attrs}")
        if set(attrs) != set(want["attrs"]):
            problems.append(f"attribute names {sorted(attrs)}, not {sorted(want['attrs'])}")
    numeric = kind_of(want["dtype"]) not in ("vlen-string", "|S1")
    if numeric:
        dtype = np.dtype(want["dtype"])
        fill = have["fillvalue"]
        if isinstance(fill, dict) and "error" in fill:
            problems.append(f"fill value: {fill['error']}")
        elif not same_numbers(numbers([fill], dtype, reader), numbers([want["fillvalue"]], dtype, "")):
            problems.append(f"fill value {fill}, not {want['fillvalue']}")
    if expected is not None and expected.values is None:  # (zstd: metadata only)
        if have["error"] is not None and not NO_FILTER.search(have["error"]):
            problems.append(f"values: {have['error']}")
        return problems
    if have["error"] is not None:
        return [*problems, f"values: {have['error']}"]
    if expected is not None:
        wanted_values, kind = expected.values, expected.kind
    else:  # (a dataset that is no array: a dimension without a variable, as h5py 3 reads it)
        kind = "number" if numeric else "text"
        wanted_values = numbers(want["values"], np.dtype(want["dtype"]), "") if numeric else \
            np.array([element(v) for v in want["values"]], dtype=object)
    assert wanted_values is not None
    flat = wanted_values.reshape(-1)
    if len(have["values"]) != flat.size:
        return [*problems, f"{len(have['values'])} values, not {flat.size}"]
    if kind == "number":
        got = numbers(have["values"], flat.dtype, reader)
        if not same_numbers(got, flat):
            like = flat.astype(got.dtype)
            same = (got == like) | (np.isnan(got) & np.isnan(like)) if got.dtype.kind == "f" else got == like
            wrong = np.flatnonzero(~same)
            problems.append(f"{wrong.size} values differ, first at {wrong[:5].tolist()}: "
                            f"{got[wrong[:5]].tolist()}, not {flat[wrong[:5]].tolist()}")
    else:
        # (each character's byte as stored: numpy's `S1` elements drop a NUL)
        wanted_texts = [bytes([b]) for b in flat.view(np.uint8).tolist()] if kind == "chars" else \
            flat.tolist()
        said = text_problems([element(v) for v in have["values"]], wanted_texts, kind)
        problems.extend(f"strings: {p}" for p in said)
    return problems


def assert_reads(reader: str, path: Path, expected: dict[str, Expected], out: Path) -> None:
    """`reader` reads `path` (its output in `out`) as h5py 3 reads it, with the values
    `expected` of zarr-python's arrays."""
    found = run_reader(reader, path, out)
    problems = problems_of(found, modern(path), expected)
    assert not problems, f"{found['reader']} reading {path}:\n  " + "\n  ".join(problems)


# -- the arrays -----------------------------------------------------------------------------


def codecs(fmt: int, *names: str) -> dict[str, Any]:
    """zarr.create_array's arguments for the chain `names` in Zarr format `fmt`."""
    if fmt == 2:
        v2 = {"zlib": numcodecs.Zlib(level=1), "gzip": numcodecs.GZip(level=1),
              "zstd": numcodecs.Zstd(level=1), "fletcher32": numcodecs.Fletcher32()}
        filters = [numcodecs.Shuffle(elementsize=int(n.split(":")[1]))
                   for n in names if n.startswith("shuffle")]
        compressors = [v2[n] for n in names if not n.startswith("shuffle")]
        # (v2 has one compressor: zlib then fletcher32 is fletcher32 alone, still passed through)
        return {"filters": filters or None, "compressors": compressors[-1:] or None}
    v3: list[Any] = []
    for name in names:
        if name.startswith("shuffle"):
            v3.append(zarr.codecs.numcodecs.Shuffle(elementsize=int(name.split(":")[1])))
        else:
            v3.append({"zlib": zarr.codecs.numcodecs.Zlib(level=1), "gzip": zarr.codecs.GzipCodec(level=1),
                       "zstd": zarr.codecs.ZstdCodec(level=1),
                       "fletcher32": zarr.codecs.numcodecs.Fletcher32()}[name])
    return {"compressors": v3 or None}


def populate(group: zarr.Group, fmt: int) -> None:
    """The arrays of every case in `group` (each case's chunks of only its fill value are
    not stored, as zarr-python leaves them)."""
    rng = np.random.default_rng(11)

    def create(name: str, data: np.ndarray[Any, Any], chunks: tuple[int, ...], *chain: str,
               unwritten: tuple[slice, ...] | None = None, **kwargs: Any) -> None:
        array = group.create_array(name, shape=data.shape, dtype=data.dtype, chunks=chunks,
                                   **codecs(fmt, *chain), **kwargs)
        if unwritten is not None:  # (chunks of the fill value alone: zarr-python stores none)
            data = data.copy()
            data[unwritten] = array.fill_value
        array[...] = data
        if unwritten is not None:
            assert array.nchunks_initialized < array.nchunks, name

    plain = rng.integers(-2**31, 2**31, (100, 130)).astype("int32")
    plain[64:, :64] = 7
    create("plain", plain, (32, 64), fill_value=7, **named(fmt, ["plain_y", "plain_x"]))
    create("zlib", rng.integers(0, 2**16, (37, 21)).astype("uint16"), (8, 16), "zlib", fill_value=3,
           unwritten=(slice(24, None), slice(None)))
    floats = rng.standard_normal((9, 10, 11)).astype("float32") * 1e30
    floats.reshape(-1)[[0, 5, 77]] = [np.nan, np.inf, -np.inf]
    create("shuffle", floats, (4, 4, 4), "shuffle:4", "zlib", fill_value=np.nan,
           unwritten=(slice(4, 8), slice(None), slice(8, None)), **named(fmt, ["level", "row", "column"]))
    wide = rng.integers(-2**62, 2**62, 1000).astype("int64")
    wide[:3] = [2**63 - 1, -2**63, 0]
    create("fletcher", wide, (64,), "zlib", "fletcher32", fill_value=-5, unwritten=(slice(900, None),))
    near_top = np.uint64(2**64 - 1) - rng.integers(0, 2**40, 50).astype("uint64")
    create("gzip", near_top, (16,), "gzip", fill_value=0)
    create("int8", rng.integers(-128, 128, (7, 5)).astype("int8"), (3, 2), fill_value=-128)
    big = rng.standard_normal((6, 7)).astype(">f8")
    if fmt == 3:  # (the bytes codec stores big-endian; v2 says so in its type)
        create("bigend", big.astype("float64"), (4, 4), "zlib", fill_value=-1.0,
               serializer=zarr.codecs.BytesCodec(endian="big"))
    else:
        create("bigend", big, (4, 4), "zlib", fill_value=-1.0)
    create("flag", rng.integers(0, 2, (20, 6)).astype(bool), (4, 3), "zlib", fill_value=False,
           unwritten=(slice(16, None), slice(None)))
    group.create_array("scalar", shape=(), dtype="float64", fill_value=0, compressors=None)[...] = 2.5
    group.create_array("unset", shape=(), dtype="int16", fill_value=-3)
    create("zstd", rng.integers(0, 100, (10, 10)).astype("int32"), (5, 5), "zstd", fill_value=0)
    string_array(Path(group.store.root) / "vlen", fmt, strings((11, 7), seed=fmt), (3, 4),
                 ["vlen_y", "vlen_x"])  # (its last chunks along the first axis not written)
    unicode = group.create_array("unicode", shape=(5, 4), dtype="<U3", chunks=(2, 3), fill_value="-")
    unicode[:4] = strings((5, 4), seed=7).astype("<U3")[:4]
    chars = group.create_array("chars", shape=(6,), dtype="S4", chunks=(4,), fill_value=b"",
                               **codecs(fmt, "zlib"))
    chars[:4] = np.array([b"ab", b"", b"\xc3\xa9t\xc3", b"wxyz"], dtype="S4")
    sub = group.create_group("sub", attributes={"title": "inner"})
    inner = sub.create_array("inner", shape=(6, 4), dtype="int16", chunks=(4, 4), fill_value=0,
                             **codecs(fmt, "zlib"), **named(fmt, ["inner_y", "inner_x"]))
    inner[...] = np.arange(24, dtype="int16").reshape(6, 4) - 12
    group["plain"].attrs.update({"units": "K", "levels": [1, 2], "scale": 0.5, "title": "plain ints"})


ARRAYS = ["plain", "zlib", "shuffle", "fletcher", "gzip", "int8", "bigend", "flag", "scalar", "unset",
          "zstd", "vlen", "unicode", "chars", "sub/inner"]
# The files read: the group's, the subgroup's, each array's own.
FILES = ["data.h5", "sub/data.h5", *(f"{name}/data.h5" for name in ARRAYS)]


@dataclass(frozen=True)
class Source:
    store: Path
    mount: Path

    def expected(self, file: str) -> dict[str, Expected]:
        """zarr-python's values of the arrays in `file`, by the name of their dataset."""
        folder = file.rsplit("/", 1)[0] if "/" in file else ""
        found = {}
        for name in ARRAYS:
            if folder and name != folder and not name.startswith(folder + "/"):
                continue
            dataset = "data" if name == folder else name.removeprefix(folder + "/") if folder else name
            values, kind = as_held(np.asarray(zarr.open_array(self.store, path=name, mode="r")[...]))
            found[dataset] = Expected(values, kind)
        return found


@pytest.fixture(scope="module", params=[2, 3], ids=["v2", "v3"])
def source(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Source]:
    """A group of every case (Zarr v2, then v3) written by zarr-python, mounted read-only."""
    root = tmp_path_factory.mktemp(f"old_readers_v{request.param}")
    group = zarr.open_group(root / "g.zarr", mode="w", zarr_format=request.param,
                            attributes={"title": "old readers"})
    populate(group, request.param)
    with mounted(root / "g.zarr", root / "mnt", ["ro"]) as mount:
        yield Source(root / "g.zarr", mount.path)


@pytest.mark.parametrize("file", FILES)
@pytest.mark.parametrize("reader", READERS)
def test_reads_as_zarr_python(source: Source, tmp_path: Path, reader: str, file: str) -> None:
    """Every dataset of the file: its values as zarr-python reads the array (a chunk never
    written as the fill value), its shape, type, chunks, fill value and attributes as h5py 3
    reads them; zstd chunks too, which the mount decodes (no reader here has the plugin)."""
    assert_reads(reader, source.mount / file, source.expected(file), tmp_path / "reading.json")


# -- over S3 --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def s3_mount(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """An array of chunks passed through (shuffle + zlib, some never written) on a moto S3
    server, mounted; (its local twin, the mount)."""
    root = tmp_path_factory.mktemp("old_readers_s3")
    data = np.random.default_rng(3).integers(-1000, 1000, (50, 40)).astype("int32")
    data[32:, :] = -1
    array = zarr.create_array(root / "a.zarr", shape=data.shape, dtype="int32", chunks=(16, 16),
                              fill_value=-1, dimension_names=["y", "x"], **codecs(3, "shuffle:4", "zlib"))
    array[...] = data
    with pytest.MonkeyPatch.context() as patch, \
            contextlib.closing(serving(S3Server(free_port()), patch)) as servers:
        server = next(servers)
        s3 = fsspec.filesystem("s3", **server.uploading_options())
        s3.put(str(root / "a.zarr"), f"{server.bucket}/a.zarr", recursive=True)
        options = ["ro", f"endpoint_url={server.endpoint_url}"]
        with mounted(f"s3://{server.bucket}/a.zarr", root / "mnt", options) as mount:
            yield root / "a.zarr", mount.path


@pytest.mark.parametrize("reader", READERS)
def test_reads_over_s3(s3_mount: tuple[Path, Path], tmp_path: Path, reader: str) -> None:
    store, mount = s3_mount
    values, kind = as_held(np.asarray(zarr.open_array(store, mode="r")[...]))
    assert_reads(reader, mount / "data.h5", {"data": Expected(values, kind)}, tmp_path / "reading.json")


# -- at scale -------------------------------------------------------------------------------

TWIN_CHUNK = (16, 16)
TWIN_STORED = [(0, 0), (500, 700), (999, 999)]


@pytest.fixture(scope="module")
def million(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """The array of 10^6 chunks, mounted read-only: (its store, the mount)."""
    root = tmp_path_factory.mktemp("old_readers_million")
    store = write_twin(root / "huge.zarr", (1000, 1000), TWIN_CHUNK, stored=TWIN_STORED, compression=ZLIB)
    with mounted(store, root / "mnt", ["ro"]) as mount:
        yield store, mount.path


@pytest.mark.parametrize("chunk", [(500, 700), (500, 701)], ids=["stored", "never-written"])
def test_hdf5_1_8_reads_a_chunk_of_a_million(million: tuple[Path, Path], tmp_path: Path,
                                             chunk: tuple[int, int]) -> None:
    """One chunk of an array of 10^6 chunks (three stored) through HDF5 1.8: the values
    zarr-python reads, a chunk never written as the fill value."""
    store, mount = million
    region = tuple(slice(c * n, (c + 1) * n) for c, n in zip(chunk, TWIN_CHUNK, strict=True))
    wanted = np.asarray(zarr.open_array(store, mode="r")[region])
    assert wanted.any() == (chunk in TWIN_STORED)
    text = ",".join(f"{s.start}:{s.stop}" for s in region)
    found = run_reader("hdf5-1.8", mount / "data.h5", tmp_path / "out.json", "--dataset", "data",
                       "--region", text)
    got = found["datasets"]["data"]
    assert got["error"] is None, got["error"]
    assert got["shape"] == [16000, 16000] and got["chunks"] == list(TWIN_CHUNK)
    assert np.array_equal(np.array(got["values"], dtype=np.uint8).reshape(wanted.shape), wanted)


# -- the harness, on files HDF5 writes --------------------------------------------------------


def hdf5_1_8_file(path: Path) -> dict[str, Expected]:
    """A file in HDF5 1.8's format (h5py 3 with libver="earliest": layout version 3, chunks
    indexed by a version-1 B-tree) of the kinds of datasets data.h5 holds; what each holds.
    The strings of variable length fill their chunks, none is empty and every chunk is
    written: HDF5 writes an empty string, and the elements of an edge chunk past the
    dataset, as no heap object, on which pyfive 1.3 fails (its reader of chunked strings
    wants a heap there: AssertionError), and jsfive fails on chunks of strings not written."""
    rng = np.random.default_rng(2)
    expected: dict[str, Expected] = {}
    with h5py.File(path, "w", libver="earliest") as f:

        def add(name: str, data: np.ndarray[Any, Any], rows: int | None = None, **kwargs: Any) -> None:
            """`data` as dataset `name`, only its first `rows` written (the chunks of the
            rest are never written: the fill value)."""
            dataset = f.create_dataset(name, shape=data.shape, dtype=data.dtype, **kwargs)
            held = data.copy()
            if rows is None:
                dataset[...] = data
            else:
                dataset[:rows] = data[:rows]
                held[rows:] = dataset.fillvalue
            expected[name] = Expected(*as_held(held))

        add("zlib", rng.integers(0, 2**16, (37, 21)).astype("uint16"), rows=24, chunks=(8, 16),
            compression="gzip", fillvalue=3)
        add("shuffle", rng.standard_normal((9, 10, 11)).astype("float32"), chunks=(4, 4, 4), shuffle=True,
            compression="gzip", fillvalue=np.float32(np.nan))
        add("fletcher", rng.integers(-2**62, 2**62, 1000).astype("int64"), chunks=(64,), compression="gzip",
            fletcher32=True, fillvalue=-5)
        add("bigend", rng.standard_normal((6, 7)).astype(">f8"), chunks=(4, 4), fillvalue=-1.0)
        add("scalar", np.array(2.5))
        add("chars", np.array([[b"a", b"b"], [b"\xc3", b"\0"]], dtype="S1"), chunks=(1, 2))
        vlen = np.array([f"w{i} é" for i in range(6)], dtype=object)
        f.create_dataset("vlen", data=vlen, dtype=h5py.string_dtype(), chunks=(3,))
        expected["vlen"] = Expected(vlen, "text")
        add("g/never", np.arange(120, dtype="int16").reshape(20, 6), rows=8, chunks=(4, 3), fillvalue=-9)
        f["g/never"].attrs.update({"units": "m", "levels": np.array([1, 2], "int32"), "scale": 0.5})
        f.create_dataset("zstd", data=np.arange(10, dtype="int16"), chunks=(5,), **hdf5plugin.Zstd())
        expected["zstd"] = Expected(None, "number")
    return expected


@pytest.fixture(scope="module")
def hdf5_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Expected]]:
    path = tmp_path_factory.mktemp("old_readers_hdf5") / "earliest.h5"
    return path, hdf5_1_8_file(path)


@pytest.mark.parametrize("reader", READERS)
def test_the_readers_read_hdf5_1_8_files(hdf5_file: tuple[Path, dict[str, Expected]], tmp_path: Path,
                                         reader: str) -> None:
    """The harness on a file of HDF5 1.8's format that HDF5 wrote, no mount: each reader
    reads it, and the comparison finds it the same, so a difference found in data.h5 is
    data.h5's."""
    path, expected = hdf5_file
    assert_reads(reader, path, expected, tmp_path / "reading.json")
