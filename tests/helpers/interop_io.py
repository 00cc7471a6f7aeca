"""The interop matrix's writers and readers (interop_cases.py): TensorStore, zarr-python and
zarrfs, each writing a `zarr.json` document's array and reading one back."""

from __future__ import annotations

import itertools
import json
import os
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import tensorstore as ts
import zarr

from tests.helpers.interop_values import random_values
from zarrfs.array import ZarrArray
from zarrfs.array_metadata import create_array, open_array
from zarrfs.formats.v3 import metadata_from_json
from zarrfs.grid import Box
from zarrfs.store import Store


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
