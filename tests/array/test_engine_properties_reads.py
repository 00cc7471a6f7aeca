"""Properties of the array engine's reads and fill: a read returns exactly the box's shape, a
read result is the caller's to change, and a chunk is all fill only when every element has the
fill value's bits."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.helpers.engine_arrays import assert_bits, forget, fresh_store
from zarrfs.array_metadata import create_array, open_array
from zarrfs.formats.v3 import metadata_from_json
from zarrfs.grid import Box
from zarrfs.store import Store

pytestmark = pytest.mark.fast


@pytest.mark.parametrize("rank", [
    0, 1, 3])
def test_read_of_rank_and_shape(rank: int) -> None:
    """A read returns exactly the box's shape, for a stored chunk and for a missing one."""
    url, store = fresh_store()
    shape = (3,) * rank
    doc = {
        "zarr_format": 3, "node_type": "array", "shape": list(shape), "data_type": "int32",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2] * rank}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0, "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
    }
    array = create_array(store, metadata_from_json(doc), threads=1)
    try:
        whole = Box((0,) * rank, shape)
        assert array.read(whole).shape == shape
        array.write(whole, np.full(shape, 5, dtype=np.int32))
        array.flush()
        array.close()
        array = open_array(Store.open(url), threads=1)
        got = array.read(whole)
        assert got.shape == shape
        assert (np.asarray(got) == 5).all()
    finally:
        array.close()
        forget(url)


@pytest.mark.parametrize("cached", [
    "written",
    "loaded",
])
def test_changing_a_read_result_does_not_change_the_array(cached: str) -> None:
    url, store = fresh_store()
    doc = {
        "zarr_format": 3, "node_type": "array", "shape": [4], "data_type": "int32",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0, "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
    }
    array = create_array(store, metadata_from_json(doc), threads=1)
    try:
        array.write(Box((0,), (4,)), np.arange(4, dtype=np.int32))
        if cached == "loaded":
            array.flush()
            array.close()
            array = open_array(Store.open(url), threads=1)
        got = array.read(Box((0,), (2,)))
        if got.flags.writeable:
            got[...] = 99
        assert_bits(array.read(Box((0,), (4,))), np.arange(4, dtype=np.int32), "after the change")
    finally:
        array.close()
        forget(url)


@pytest.mark.parametrize(("values", "fill", "expected"), [
    (np.zeros(1000, np.uint16), 0, True),
    (np.r_[np.zeros(999, np.uint16), 1].astype(np.uint16), 0, False),  # only the last differs
    (np.r_[1, np.zeros(999, np.uint16)].astype(np.uint16), 0, False),  # only the first differs
    (np.full(1000, -0.0, np.float32), 0.0, False),  # the bits, not the value
    (np.full((10, 10), np.nan, np.float64), np.nan, True),
    (np.zeros(0, np.int32), 7, True),
])
def test_a_chunk_is_all_fill_only_when_every_element_has_the_fill_bits(
        values: np.ndarray, fill: Any, expected: bool) -> None:
    from zarrfs.codecs.pipeline import is_fill

    assert is_fill(values, np.array(fill, values.dtype).tobytes()) is expected
