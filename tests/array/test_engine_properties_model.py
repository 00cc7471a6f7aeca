"""Property tests of the array engine against a numpy model.

Random arrays (rank 0-4, any chunk shape, sharded or not, several codecs, data types and fill
values, both key encodings) on `memory://` stores get random sequences of region writes, reads,
flushes and re-opens, with caches small enough to evict constantly. After every step a read
must equal the model bit for bit; at the end the store must hold exactly the chunks that are
not all fill value, and a fresh array must read the model back.
"""

from __future__ import annotations

import itertools
import json
import math
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers.engine_arrays import STORAGE, Config, assert_bits, forget, fresh_store, raw, values
from zarrfs.array import ZarrArray
from zarrfs.array_metadata import create_array, open_array
from zarrfs.formats.v3 import metadata_from_json, parse_metadata
from zarrfs.grid import Box
from zarrfs.store import Store

pytestmark = pytest.mark.fast


SETTINGS = settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


FILLS: dict[str, list[Any]] = {
    "bool": [False, True],
    "int4": [0, -8, 7, -1],
    "uint8": [0, 255, 17],
    "int16": [0, -1, 1234],
    "uint32": [0, 4294967295],
    "int64": [0, -(2**63), 42],
    "float16": [0.0, -0.0, "NaN", "0x7e01", "Infinity"],
    "bfloat16": [0.0, "NaN", "0x7fc1", -1.5],
    "float32": [0.0, -0.0, "NaN", "0x7fc00001", 2.5],
    "float64": [0.0, "NaN", "0x7ff8000000000001", -1e300],
    "complex64": [[0.0, 0.0], ["NaN", 0.0], [-0.0, 1.0]],
}


def fill_element(value: Any, data_type: str) -> np.ndarray:
    """One element (a 0-d array) from the JSON form of a fill value, decoded independently."""
    dtype = STORAGE[data_type]
    if dtype.kind == "c":
        part = np.dtype(f"f{dtype.itemsize // 2}")
        return np.concatenate([_float(value[0], part), _float(value[1], part)]).view(dtype)[0, ...]
    if data_type in ("float16", "bfloat16", "float32", "float64"):
        return _float(value, dtype)[0, ...]
    return np.array(value, dtype=dtype)


def _float(value: Any, dtype: np.dtype[Any]) -> np.ndarray:
    if isinstance(value, str) and value.startswith("0x"):
        return np.frombuffer(int(value, 16).to_bytes(dtype.itemsize, "little"), dtype=dtype)
    words = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
    return np.array([words.get(value, value)], dtype=dtype)


def _bytes(data_type: str, endian: str) -> dict[str, Any]:
    if STORAGE[data_type].itemsize == 1:
        return {"name": "bytes"}
    return {"name": "bytes", "configuration": {"endian": endian}}


@st.composite
def configs(draw: st.DrawFn, ranks: tuple[int, int] = (0, 4)) -> Config:
    rank = draw(st.integers(*ranks))
    shape = tuple(draw(st.lists(st.integers(0 if rank else 1, 9), min_size=rank, max_size=rank)))
    if rank and draw(st.booleans()):
        shape = tuple(max(n, 1) for n in shape)  # mostly non-empty arrays
    read_shape = tuple(draw(st.lists(st.integers(1, 5), min_size=rank, max_size=rank)))
    data_type = draw(st.sampled_from(sorted(STORAGE)))
    fill_json = draw(st.sampled_from(FILLS[data_type]))

    codecs: list[dict[str, Any]] = []
    if rank > 1 and draw(st.booleans()):
        order = draw(st.permutations(range(rank)))
        codecs.append({"name": "transpose", "configuration": {"order": list(order)}})
    codecs.append(_bytes(data_type, draw(st.sampled_from(["little", "big"]))))
    compressor = draw(st.sampled_from(["none", "gzip", "zstd", "blosc", "crc32c"]))
    if compressor == "gzip":
        codecs.append({"name": "gzip", "configuration": {"level": 1}})
    elif compressor == "zstd":
        codecs.append({"name": "zstd", "configuration": {"level": 1, "checksum": True}})
    elif compressor == "blosc":
        codecs.append({"name": "blosc", "configuration": {
            "cname": "lz4", "clevel": 1, "shuffle": "shuffle",
            "typesize": STORAGE[data_type].itemsize, "blocksize": 0}})
    elif compressor == "crc32c":
        codecs.append({"name": "crc32c"})

    chunk_shape = read_shape
    if draw(st.booleans()):  # sharded: the inner chunks carry the codecs above
        per_shard = draw(st.lists(st.integers(1, 3), min_size=rank, max_size=rank))
        chunk_shape = tuple(c * p for c, p in zip(read_shape, per_shard, strict=True))
        index_codecs = [{"name": "bytes", "configuration": {"endian": "little"}}]
        if draw(st.booleans()):
            index_codecs.append({"name": "crc32c"})
        codecs = [{"name": "sharding_indexed", "configuration": {
            "chunk_shape": list(read_shape),
            "codecs": codecs,
            "index_codecs": index_codecs,
            "index_location": draw(st.sampled_from(["start", "end"])),
        }}]
    encoding = draw(st.sampled_from(["default", "v2"]))
    separator = draw(st.sampled_from(["/", "."]))
    doc = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": list(shape),
        "data_type": data_type,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunk_shape)}},
        "chunk_key_encoding": {"name": encoding, "configuration": {"separator": separator}},
        "fill_value": fill_json,
        "codecs": codecs,
        "attributes": {},
    }
    read_nbytes = math.prod(read_shape) * STORAGE[data_type].itemsize
    # From "nothing fits" to "everything fits": eviction and write-back under pressure.
    cache_bytes = draw(st.sampled_from([0, read_nbytes, 3 * read_nbytes, 1 << 20]))
    return Config(doc, data_type, shape, chunk_shape, read_shape,
                  fill_element(fill_json, data_type), cache_bytes)


@st.composite
def boxes(draw: st.DrawFn, shape: tuple[int, ...], extended: tuple[int, ...] | None = None) -> Box:
    """A box inside `shape` (or inside `extended`, the edge chunks' overhang included)."""
    limits = extended or shape
    start, stop = [], []
    for n in limits:
        a = draw(st.integers(0, n))
        b = draw(st.integers(a, n))
        start.append(a)
        stop.append(b)
    return Box(tuple(start), tuple(stop))


def _grid(shape: tuple[int, ...], cell: tuple[int, ...]) -> Iterator[tuple[int, ...]]:
    return itertools.product(*(range(-(-n // c)) for n, c in zip(shape, cell, strict=True)))


def _expected_keys(config: Config, model: np.ndarray) -> set[str]:
    fill = raw(config.fill)
    keys = set()
    for index in _grid(config.shape, config.chunk_shape):
        region = model[tuple(slice(i * c, (i + 1) * c)
                             for i, c in zip(index, config.chunk_shape, strict=True))]
        if region.size and not (raw(region).reshape(-1, fill.size) == fill).all():
            keys.add(config.key(index))
    return keys


def _stored_keys(store: Store) -> set[str]:
    return {key for key in store.list("") if key != "zarr.json"}


def _read_extended(array: ZarrArray, box: Box, model: np.ndarray, fill: np.ndarray) -> np.ndarray:
    """What a read of `box` (possibly in the overhang) must return: the model, else fill."""
    expected = np.full(box.shape, fill, dtype=model.dtype)
    inside = _inside(box, model.shape)
    if inside is not None:
        expected[inside.slices(box.start)] = model[inside.slices()]
    return expected


def _inside(box: Box, shape: tuple[int, ...]) -> Box | None:
    """The part of `box` inside the array (None: none of it)."""
    inside = Box(box.start, tuple(min(b, n) for b, n in zip(box.stop, shape, strict=True)))
    if all(b > a for a, b in zip(inside.start, inside.stop, strict=True)) or not box.shape:
        return inside
    return None


def _region_reads_and_writes(config: Config, data: st.DataObject) -> None:
    url, store = fresh_store()
    metadata = metadata_from_json(config.doc)
    assert parse_metadata(json.dumps(metadata.to_json())) == metadata
    model = np.full(config.shape, config.fill, dtype=STORAGE[config.data_type])
    array = create_array(store, metadata, cache_bytes=config.cache_bytes, threads=2)
    try:
        extended = array.extended_shape
        for step in range(data.draw(st.integers(1, 8), label="steps")):
            action = data.draw(st.sampled_from(["write", "write", "write", "read", "read",
                                                "flush", "reopen"]), label=f"action {step}")
            if action == "write":
                # (in the overhang too, as a chunk file writes: dropped there)
                box = data.draw(boxes(config.shape, extended), label=f"write box {step}")
                mode = data.draw(st.sampled_from(["random", "fill", "mixed"]))
                new = values(config, box.shape, data.draw(st.integers(0, 2**32)), mode)
                array.write(box, new)
                inside = _inside(box, model.shape)
                if inside is not None:
                    model[inside.slices()] = new[inside.slices(box.start)]
            elif action == "read":
                box = data.draw(boxes(config.shape, extended), label=f"read box {step}")
                assert_bits(array.read(box), _read_extended(array, box, model, config.fill),
                            f"step {step}: read {box}")
            elif action == "flush":
                array.flush()
                assert array.dirty_bytes == 0
            else:
                array.flush()
                array.close()
                array = open_array(Store.open(url), cache_bytes=config.cache_bytes, threads=2)
        whole = Box((0,) * len(config.shape), config.shape)
        assert_bits(array.read(whole), model, "the whole array before the last flush")
        array.flush()
        assert _stored_keys(store) == _expected_keys(config, model)
        array.close()
        array = open_array(Store.open(url), cache_bytes=1 << 20, threads=2)
        assert_bits(array.read(whole), model, "the whole array after re-opening")
        assert array.stored_chunk_count() == len(_expected_keys(config, model))
    finally:
        array.close()
        forget(url)


@SETTINGS
@given(config=configs(ranks=(1, 4)), data=st.data())
def test_region_reads_and_writes_match_a_numpy_model(config: Config, data: st.DataObject) -> None:
    _region_reads_and_writes(config, data)


@SETTINGS
@given(config=configs(ranks=(0, 0)), data=st.data())
def test_region_reads_and_writes_match_a_numpy_model_rank0(config: Config,
                                                           data: st.DataObject) -> None:
    _region_reads_and_writes(config, data)


def test_a_write_in_an_edge_chunks_overhang_makes_none_of_it_known() -> None:
    """A write wholly in an edge chunk's overhang (past the array, through its chunk file) is
    dropped: the chunk's elements in the array stay the fill value, and nothing is stored.
    (It was counted toward the chunk's being written whole: 13 elements in the overhang of
    a chunk with 13 in the array, which then read, and were stored, as whatever the chunk's
    new buffer held.)"""
    url, store = fresh_store()
    doc = {"zarr_format": 3, "node_type": "array", "shape": [41, 39], "data_type": "int32",
           "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [10, 13]}},
           "chunk_key_encoding": {"name": "default"}, "fill_value": 7,
           "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}]}
    array = create_array(store, metadata_from_json(doc), cache_bytes=1 << 20, threads=2)
    row = Box((40, 13), (41, 26))  # chunk (4, 1)'s one row in the array
    try:
        array.write(Box((49, 13), (50, 26)), np.full((1, 13), 1, dtype=np.int32))  # its last
        assert (array.read(row) == 7).all()
        array.flush()
        array.close()
        array = open_array(Store.open(url), cache_bytes=1 << 20, threads=2)
        assert (array.read(row) == 7).all()
        assert array.stored_chunk_count() == 0
    finally:
        array.close()
        forget(url)


@SETTINGS
@given(config=configs(), data=st.data())
def test_unflushed_writes_are_visible_and_stored_only_when_whole(config: Config,
                                                                  data: st.DataObject) -> None:
    """Writes live in the cache until a flush (or cache pressure) writes them back, or until a
    chunk (shard) is written whole, which is stored at once; reads see them at once, nothing
    written in part is stored before the flush, and a flush then stores them all."""
    url, store = fresh_store()
    array = create_array(store, metadata_from_json(config.doc), cache_bytes=1 << 30,
                             threads=2)
    model = np.full(config.shape, config.fill, dtype=STORAGE[config.data_type])
    covered = np.zeros(config.shape, dtype=bool)
    versions = []  # the model and what was written of it, after each write
    try:
        for step in range(data.draw(st.integers(1, 4))):
            box = data.draw(boxes(config.shape), label=f"box {step}")
            new = values(config, box.shape, step, "random")
            array.write(box, new)
            model[box.slices()] = new
            covered[box.slices()] = True
            versions.append((model.copy(), covered.copy()))
        _wait_for_early_writes(array)
        whole = Box((0,) * len(config.shape), config.shape)
        assert_bits(array.read(whole), model, "before the flush")
        stored = {key: index for index in _grid(config.shape, config.chunk_shape)
                  if (key := config.key(index)) in _stored_keys(store)}
        for key, index in stored.items():
            region = Box(tuple(i * c for i, c in zip(index, config.chunk_shape, strict=True)),
                         tuple(min((i + 1) * c, n) for i, c, n in
                               zip(index, config.chunk_shape, config.shape, strict=True)))
            early = open_array(Store.open(url), threads=1)
            try:
                got = raw(early.read(region))
            finally:
                early.close()
            # A chunk rewritten while it was being stored holds an earlier whole version.
            assert any(was_covered[region.slices()].all() and np.array_equal(got, raw(was[region.slices()]))
                       for was, was_covered in versions), f"{key} was stored before the flush, in part"
        array.flush()
        assert _stored_keys(store) == _expected_keys(config, model)
    finally:
        array.close()
        forget(url)


def _wait_for_early_writes(array: ZarrArray) -> None:
    for _ in range(1000):
        if not array.early.jobs:
            return
        time.sleep(0.01)
    raise AssertionError("chunks stored ahead of a flush did not finish in 10 s")
