"""The readers of HDF5 1.8's format that know nothing of HDF5 1.10's, and what their reading of
`data.h5` must hold (tests/views/hdf5/test_hdf5_old_readers_*.py): the HDF5 1.8.18 library
(h5py 2.7.1 on Python 3.6, in .venv-hdf5-1.8), pyfive (pure Python) and jsfive (pure
JavaScript, on node); scripts/install installs them.

Each reader's program (tests/hdf5_old_readers/) writes every dataset of a file it reads:
name, shape, type, chunks, fill value, attributes and values. The values are compared with
zarr-python's reading of the array; the rest with h5py 3's reading of the same file (modern
HDF5).

What each reader does that the comparison allows for (each program's comments say more):
pyfive 1.3 fails on a chunk the index does not hold (its program fills such chunks with the
dataset's fill value as pyfive reads it), jsfive 0.4.2 leaves their elements undefined
(likewise filled), as it does a dataset with no storage (a dimension without a variable),
and reads 64-bit integers as doubles; h5py 2.7.1 reads fixed-length strings of UTF-8 (the
attributes' text) only through its low-level API. (data.h5's index holds every chunk, one
never written pointing at a chunk of fill values; HDF5's own files leave them out, as
test_hdf5_old_readers_hdf5_files.py's file shows.)
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import h5py
import hdf5plugin  # noqa: F401  (registers zstd: h5py 3 reads the zstd datasets of data.h5)
import numcodecs
import numpy as np
import pytest
import zarr
import zarr.codecs.numcodecs

from tests.hdf5_old_readers import read_h5

REPO = Path(__file__).resolve().parents[2]
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
