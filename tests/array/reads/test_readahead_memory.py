"""The memory of reading ahead without FUSE (zarrfs.array.reads.readahead): closing cancels the
decoding ahead and gives the cache back, slabs lend their buffers to the slabs after them
(never while a reply still holds one), and buffers ahead stay within their share of the cache
however many readers stream."""

from __future__ import annotations

import threading
import weakref
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.readahead_slabs import (
    CHUNKS,
    SHAPE,
    SLAB,
    VALUES,
    expected_bytes,
    finished_slab,
    opened_array,
    small_slabs,  # noqa: F401  (autouse: slabs of one row of chunks, in this module only)
)
from zarrfs.array import ZarrArray
from zarrfs.array.reads import readahead
from zarrfs.array.reads.readahead import Readahead
from zarrfs.views import RegionFile

pytestmark = [pytest.mark.fast, pytest.mark.usefixtures("stream_threads")]


def test_close_cancels_decoding_ahead_and_gives_the_cache_back(array: ZarrArray,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    fetch = array.source.fetch
    closed = threading.Event()

    def fetch_held_after_slab_0(units: list[Any]) -> Any:
        if units[0][0] > 0:  # a chunk row after the first (one row of chunks per slab)
            closed.wait(10)
        return fetch(units)

    monkeypatch.setattr(array.source, "fetch", fetch_held_after_slab_0)
    reader = RegionFile(array, None).readahead()
    reader.read(0, 4096)  # waits for slab 0; the slabs ahead are in progress, held
    streams = list(reader.slabs().values())
    held = readahead.SLABS_AHEAD + 1
    assert array.cache.reserved_bytes == held * SLAB
    reader.close()
    closed.set()
    for stream in streams:
        stream.wait()
    per_slab = SHAPE[1] // CHUNKS[1]
    assert array.stats.loads < held * per_slab, "closing did not stop the decoding ahead"
    assert array.cache.reserved_bytes == 0
    assert not streams[-1].current, "a cancelled slab was offered"


def _read_through(reader: Readahead, held: list[Any] | None = None) -> list[Any]:
    """Read the whole file in order (checking every byte); weak references to the buffers of
    the slabs met, in order (each slab's once)."""
    buffers: dict[int, Any] = {}
    for position in range(0, VALUES.nbytes, 8192):
        piece = reader.ready(position, 8192) or reader.read(position, 8192)
        assert bytes(piece) == expected_bytes(position, 8192)
        if held is not None and position == 0:
            held.append(piece)
        for index, stream in list(reader.slabs().items()):
            if index not in buffers and stream.buffer is not None:
                buffers[index] = weakref.ref(stream.buffer)
    return [buffers[index] for index in sorted(buffers)]


def test_a_closed_slab_lends_its_buffer_to_a_slab_after_it(array: ZarrArray) -> None:
    reader = RegionFile(array, None).readahead()
    buffers = _read_through(reader)
    reused = [i for i, ref in enumerate(buffers) if any(ref() is not None and ref() is earlier()
                                                        for earlier in buffers[:i])]
    assert reused, "every slab was given fresh memory"
    reader.close()
    assert array.cache.reserved_bytes == 0 and not array.cache.spare_slabs


def test_the_buffer_of_a_slab_a_reply_still_holds_is_not_lent_again(array: ZarrArray) -> None:
    reader = RegionFile(array, None).readahead()
    held: list[Any] = []
    buffers = _read_through(reader, held)
    assert bytes(held[0]) == expected_bytes(0, 8192), "the reply's bytes were overwritten"
    assert all(ref() is not buffers[0]() for ref in buffers[1:]), "its buffer went to another slab"
    reader.close()


def test_a_slab_closed_while_a_reader_waits_for_it_is_read_again(array: ZarrArray) -> None:
    reader = RegionFile(array, None).readahead()
    reader.read(0, 4096)
    finished_slab(reader, 1).close()  # as a reader's request that moved on would, meanwhile
    assert reader.slabs()[1].piece(0, 4096) is None
    assert bytes(reader.read(SLAB, 4096)) == expected_bytes(SLAB, 4096)
    reader.close()


def test_buffers_ahead_stay_within_their_share_of_the_cache(tmp_path: Path) -> None:
    array = opened_array(tmp_path, cache_bytes=8 * SLAB)  # room for 2 slabs ahead, in all
    try:
        readers = [RegionFile(array, None).readahead() for _ in range(6)]
        highest = 0
        for position in range(0, VALUES.nbytes, 8192):
            for reader in readers:
                piece = reader.ready(position, 8192) or reader.read(position, 8192)
                assert bytes(piece) == expected_bytes(position, 8192)
                highest = max(highest, array.cache.reserved_bytes)
                assert array.cache.total_bytes <= array.cache.capacity
        assert 0 < highest <= array.cache.reserve_limit
        for reader in readers:
            reader.close()
    finally:
        array.close()
