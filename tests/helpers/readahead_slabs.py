"""What the tests of reading ahead without FUSE (tests/array/reads/test_readahead_*.py) share: the
array (256 x 192 uint16 in 32 x 64 zstd chunks; the fixture `array`, tests/array/reads/
conftest.py), slabs of one row of chunks (`small_slabs`, autouse: each module imports it, as
it must not apply to the room's other modules), a slab once decoded and the bytes expected."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers.local_arrays import create_zstd_array
from zarrfs.array import ZarrArray
from zarrfs.array.reads import readahead, slab_layout
from zarrfs.array.reads.readahead import Readahead
from zarrfs.array_metadata import open_array
from zarrfs.store import Store

SHAPE = (256, 192)
CHUNKS = (32, 64)
ROW = SHAPE[1] * 2  # bytes per row of uint16
SLAB = CHUNKS[0] * ROW  # one row of chunks per slab (SLAB_BYTES is patched down to it)
VALUES = np.arange(np.prod(SHAPE), dtype="<u2").reshape(SHAPE) * 7


def opened_array(path: Path, cache_bytes: int = 64 << 20) -> ZarrArray:
    create_zstd_array(path, VALUES, CHUNKS)
    return open_array(Store.open(str(path)), cache_bytes=cache_bytes, threads=2)


def finished_slab(reader: Readahead, index: int) -> Any:
    stream = reader.slabs()[index]
    assert stream.wait(), "the slab did not finish"
    return stream


def expected_bytes(offset: int, size: int, values: np.ndarray = VALUES) -> bytes:
    return values.tobytes()[offset : offset + size]


@pytest.fixture(autouse=True)
def small_slabs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slab_layout, "SLAB_BYTES", SLAB)
    monkeypatch.setattr(readahead, "STREAK_BYTES", 4096)  # slabs after one read in order
