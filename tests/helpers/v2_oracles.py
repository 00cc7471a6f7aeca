"""The writers, readers and checks of the Zarr v2 interop matrix (tests/interop/test_v2_matrix_*.py):
arrays written by zarr-python 3 (`zarr_format=2`) and by TensorStore's `zarr` driver, read
back by each writer, and the mounted array checked against them.

The oracle is the writer's own reading, converted to the flat view of the contract (C order,
little-endian unless `-o endian=big`); the fill value is decoded here from the stored
`.zarray`, independently of zarrfs, and checked against what the writer reads in its missing
chunk.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import math
import os
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import tensorstore as ts
import zarr

from tests.helpers.v2_cases import DEFAULT, UNCHECKED, Spec, model, python_fill

# -- writers and readers ---------------------------------------------------------------------


def write_zarr_python(spec: Spec, path: str) -> np.ndarray:
    """Create and write the array; zarr-python's own reading of it, the first chunk dropped
    (read through the array it created: zarr-python 3.1 cannot reopen nested structured v2
    arrays)."""
    kwargs: dict[str, Any] = {}
    if spec.fill is not DEFAULT:
        kwargs["fill_value"] = python_fill(spec)
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


def stored_metadata(store: Path) -> dict[str, bytes]:
    return {name: (store / name).read_bytes() for name in (".zarray", ".zattrs")
            if (store / name).exists()}


def check_array(spec: Spec, store: Path, root: Path, written: np.ndarray, endian: str = "<") -> None:
    """Everything a read-only mount of `store` at `root` must show."""
    metadata = stored_metadata(store)
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


def check_zarr_python_metadata(spec: Spec, store: Path) -> None:
    """The metadata zarr-python wrote is the form the case is meant to cover."""
    zarray = json.loads((store / ".zarray").read_bytes())
    if spec.fill_json is not UNCHECKED:
        assert zarray["fill_value"] == spec.fill_json
    assert zarray["order"] == spec.order and zarray["dimension_separator"] == spec.separator


def zarray_for(spec: Spec) -> dict[str, Any]:
    """The metadata zarr-python writes for the case, for TensorStore to write too."""
    if spec.tensorstore_defaults:
        return {"shape": list(spec.shape), "chunks": list(spec.chunks), "dtype": spec.np_dtype.str,
                "order": spec.order, "dimension_separator": spec.separator}
    with tempfile.TemporaryDirectory(dir=scratch_root()) as where:
        path = os.path.join(where, "a")
        write_zarr_python(dataclasses.replace(spec, written=False), path)
        with open(os.path.join(path, ".zarray")) as f:
            return dict(json.load(f))


def scratch_root() -> str | None:
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


def tensorstore_oracle(spec: Spec, path: Path) -> np.ndarray:
    if tensorstore_can_read(spec.np_dtype):
        seen = read_tensorstore(path, spec.np_dtype)
        assert flat(seen) == flat(read_zarr_python(path)), "TensorStore and zarr-python disagree"
        return seen
    return read_zarr_python(path)
