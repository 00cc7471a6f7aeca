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
given, so often `{}`); `test_zarr_python_writes_the_recorded_forms` pins them down (the cases:
tests/helpers/v3_extension_cases.py).
"""

from __future__ import annotations

import json
import os
import shutil
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers.v3_extension_cases import CASES, ExtCase, create, open_zarr, random_values, read_zarr


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
    fresh = (case.values or random_values)(dtype, case.shape, np.random.default_rng(7))
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
