"""Read-ahead priced in requests (zarrfs.array.reads.readahead_cost and the budget of
zarrfs.array.reads.readahead), without FUSE: the chunks a run of bytes touches, the kernel's window
an array's chunks afford, and a reader that earns what is read ahead of it by reading in order."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers.local_arrays import create_zstd_array
from zarrfs.array import ZarrArray
from zarrfs.array.reads import chunks_touched, kernel_window_kb, readahead, slab_layout
from zarrfs.array_metadata import open_array
from zarrfs.grid import Box
from zarrfs.store import Store
from zarrfs.views import RegionFile

pytestmark = pytest.mark.fast

SHAPE, CHUNKS = (256, 1024), (16, 16)  # rows of 1 KiB; a row of chunks is 64 chunks, 16 KiB
ROW_OF_CHUNKS = CHUNKS[0] * SHAPE[1]
PER_ROW = SHAPE[1] // CHUNKS[1]
VALUES = (np.arange(np.prod(SHAPE)) % 251).astype("u1").reshape(SHAPE)


def brute_force(shape: tuple[int, ...], chunk: tuple[int, ...], first: int, last: int) -> int:
    cells = {tuple(i // c for i, c in zip(np.unravel_index(n, shape), chunk, strict=True))
             for n in range(first, last)}
    return len(cells)


@pytest.mark.parametrize(("shape", "chunk"), [((7, 9), (2, 4)), ((5, 6, 7), (2, 3, 4)), ((30,), (7,))])
def test_chunks_touched_counts_each_chunk_once(shape: tuple[int, ...], chunk: tuple[int, ...]) -> None:
    size = int(np.prod(shape))
    for first, last in itertools.combinations(range(0, size + 1, 3), 2):
        assert chunks_touched(shape, chunk, first, last) == brute_force(shape, chunk, first, last), \
            (first, last)


def test_the_kernel_window_shrinks_with_the_chunks_it_would_cost() -> None:
    assert kernel_window_kb((2048, 2048), (16, 16), 1) == 8  # (a page is a row of 128 chunks)
    assert kernel_window_kb((1_000_000, 1_000_000), (32, 32), 1) == 8
    assert kernel_window_kb((8192, 16384), (512, 512), 2) == 1024  # (1 MiB: 32-64 chunks)
    assert kernel_window_kb((4096, 4096), (128, 128), 4) == 512
    assert kernel_window_kb((0, 5), (1, 1), 1) == 1024


@pytest.fixture
def array(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ZarrArray]:
    monkeypatch.setattr(readahead, "STREAK_BYTES", 16 << 10)
    monkeypatch.setattr(slab_layout, "SLAB_REQUESTS", 2 * PER_ROW)  # (2 rows of chunks a slab)
    monkeypatch.setattr(readahead, "FIRST_AHEAD_REQUESTS", 1)
    monkeypatch.setattr(readahead, "SEQUENTIAL_SLACK", 0)  # (the whole file is within 4 MiB)
    create_zstd_array(tmp_path, VALUES, CHUNKS)
    opened = open_array(Store.open(str(tmp_path)), cache_bytes=64 << 20, threads=2)
    yield opened
    opened.close()


def _settle(reader: Any) -> None:
    for stream in reader.slabs().values():
        stream.wait()


def test_reads_in_order_short_of_the_streak_load_only_what_they_touch(array: ZarrArray) -> None:
    """As a reader through `mmap` of a few pages, the kernel's window around them: in order,
    but less than STREAK_BYTES; nothing is read ahead of them, slabs or cache."""
    for file in (RegionFile(array, None), RegionFile(array, Box((16, 0), (SHAPE[0], SHAPE[1])))):
        loads = array.stats.loads
        reader = file.readahead()
        start = 5 * ROW_OF_CHUNKS + 4096  # (inside a row of chunks)
        for offset in range(start, start + (12 << 10), 4096):
            assert bytes(reader.read(offset, 4096)) == file.read(offset, 4096)
        assert not reader.slabs()
        touched = chunks_touched(file.region.shape, CHUNKS, start, start + (12 << 10))
        assert array.stats.loads - loads <= touched
        reader.close()


def test_slabs_hold_at_most_slab_requests_and_more_go_ahead_as_the_reader_goes_on(array: ZarrArray) -> None:
    reader = RegionFile(array, None).readahead()
    held = []
    for offset in range(0, 8 * ROW_OF_CHUNKS, 8 << 10):
        reader.read(offset, 8 << 10)
        held.append(len(reader.slabs()))
        for stream in reader.slabs().values():
            assert stream.out is None or stream.out.shape[0] <= 2 * CHUNKS[0], "a slab past its requests"
    _settle(reader)
    assert held[0] == 0, "slabs before the reader earned them"
    earned = held.index(next(n for n in held if n))
    assert held[earned] < max(held), "the slabs ahead did not grow with the reads in order"
    reader.close()


def test_a_jump_spends_the_budget(array: ZarrArray) -> None:
    reader = RegionFile(array, None).readahead()
    for offset in range(0, 4 * ROW_OF_CHUNKS, 8 << 10):
        reader.read(offset, 8 << 10)
    assert reader.slabs()
    _settle(reader)
    loads = array.stats.loads
    far = 12 * ROW_OF_CHUNKS + 4096
    assert bytes(reader.read(far, 4096)) == VALUES.tobytes()[far : far + 4096]
    assert not reader.slabs(), "slabs kept after a jump"
    assert array.stats.loads - loads <= PER_ROW, "a read after a jump loaded more than its row of chunks"
    reader.close()
