"""The memory of storing chunks ahead of a flush (zarrfs.array.writes.writeback.store_early),
without FUSE: a shard being stored counts against the cache and gives its memory back, a
writer past the dirty limit waits for it, shard write-backs share the cache; a stored chunk's
buffer goes to the next new chunk, never while anything still refers to it."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers.cache_watch import cached_bytes_at_puts
from tests.helpers.early_writes import CHUNKS, INNER, SHAPE, local_array, seeded, write_seeded
from tests.helpers.mounting import wait_until
from zarrfs.array import ZarrArray
from zarrfs.array_metadata import open_array
from zarrfs.grid import Box
from zarrfs.store import Store

pytestmark = pytest.mark.fast


CHUNK_BYTES = CHUNKS[0] * CHUNKS[1] * 2


def _assert_holds(array: ZarrArray, written: list[tuple[Box, int]]) -> None:
    """Each box reads back the values `write_seeded` put there with its seed."""
    for box, seed in written:
        assert np.array_equal(array.read(box), seeded(box, seed=seed))


def test_a_shard_being_stored_counts_against_the_cache_and_gives_memory_back(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The new inner chunks of a shard being written back are made while the cache is full
    of clean chunks: they make room first, and the room made goes back to the system."""
    whole = Box((0, 0), SHAPE)
    local_array(tmp_path, sharded=True).close()
    writer = open_array(Store.open(str(tmp_path)), threads=2)
    writer.write(whole, seeded(whole))
    writer.flush()
    writer.close()
    shard_bytes = CHUNKS[0] * CHUNKS[1] * 2
    array = open_array(Store.open(str(tmp_path)), threads=2, cache_bytes=6 * shard_bytes)
    try:
        others = Box((CHUNKS[0], 0), SHAPE)  # all but the first row of shards: more than fits
        assert np.array_equal(array.read(others), seeded(whole)[CHUNKS[0]:])
        cache, given_back = array.cache, []
        cache.give_back = lambda: given_back.append(1)
        seen = cached_bytes_at_puts(array, monkeypatch)
        shard = Box((0, 0), CHUNKS)
        write_seeded(array, shard, 7)
        assert len(seen) == 1 and seen[0] + shard_bytes <= cache.capacity
        assert given_back
        with cache.lock:  # the hold ended: the cache counts its entries and nothing else
            assert cache.total_bytes == sum(e.nbytes for e in cache.entries.values()) + cache.reserved_bytes
        assert np.array_equal(array.read(shard), seeded(shard, seed=7))
    finally:
        array.close()


def test_a_stored_chunks_buffer_goes_to_the_next_new_chunk(tmp_path: Path) -> None:
    """A sequential writer's chunks, once stored, give their memory to the chunks that follow,
    however much room the cache has: the cache holds about what is being written."""
    array = local_array(tmp_path, cache_bytes=64 * CHUNK_BYTES)  # room for all 12 chunks, 5 times
    try:
        for row in range(0, SHAPE[0], CHUNKS[0]):
            band = Box((row, 0), (row + CHUNKS[0], SHAPE[1]))
            write_seeded(array, band, row)
        with array.cache.lock:
            held = len(array.cache.entries)
        assert held <= 2 * (SHAPE[1] // CHUNKS[1])  # about two rows of chunks, not all four
        _assert_holds(array, [(Box((row, 0), (row + CHUNKS[0], SHAPE[1])), row)
                              for row in range(0, SHAPE[0], CHUNKS[0])])
    finally:
        array.close()


def test_a_buffer_a_reader_still_holds_is_not_reused(tmp_path: Path) -> None:
    array = local_array(tmp_path, cache_bytes=16 * CHUNK_BYTES)
    try:
        first = Box((0, 0), CHUNKS)
        write_seeded(array, first, 1)
        held = array.read(first)  # a view into the cached chunk
        assert not held.flags.owndata
        rows = Box((CHUNKS[0], 0), (3 * CHUNKS[0], SHAPE[1]))  # six new chunks: past a quarter
        write_seeded(array, rows, 2)
        assert np.array_equal(held, seeded(first, seed=1))
        del held
        last = Box((3 * CHUNKS[0], 0), SHAPE)
        write_seeded(array, last, 3)  # now the first chunk's buffer may go
        _assert_holds(array, [(first, 1), (rows, 2), (last, 3)])
    finally:
        array.close()


def test_a_reader_that_waited_for_a_chunk_whose_buffer_went_reads_it_again(tmp_path: Path) -> None:
    from concurrent.futures import Future

    array = local_array(tmp_path, cache_bytes=8 * CHUNK_BYTES)
    try:
        row = Box((0, 0), (CHUNKS[0], SHAPE[1]))  # three chunks: past a quarter of the cache
        write_seeded(array, row, 1)
        unit = (0, 0)
        waited = array.wait(unit)  # what a reader got before the buffer was taken
        with array.cache.lock:
            array.cache.reusable.appendleft((array.owner, unit))  # the oldest stored chunk
            taken = array.cache.buffer_for(array.read_chunk_shape, array.data_type.storage)
        assert waited.retired
        taken[...] = 0  # its new owner writes into it
        done: Future[Any] = Future()
        done.set_result(waited)
        first = Box((0, 0), CHUNKS)
        assert np.array_equal(array.source.lend(unit, {unit: done}), seeded(row, seed=1)[first.slices()])
    finally:
        array.close()


def test_a_writer_past_the_dirty_limit_waits_for_the_shards_being_stored(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the dirty limit, a writer first waits for the shards being stored already: what
    they free is enough, and the next row's half-written shards are not stored half done, to
    be read back and stored again."""
    # A dirty limit of 3.4 shards: row 0 (3 shards) fits, not with half a shard more.
    array = local_array(tmp_path, sharded=True, cache_bytes=9 * CHUNK_BYTES // 2)
    whole = Box((0, 0), SHAPE)
    write_seeded(array, whole, 1)
    array.flush()  # every shard stored: a half-done one would have to be read back
    put = array.store.put
    stored: list[str] = []
    release = threading.Event()

    def slow_put(key: str, data: Any, **kwargs: Any) -> Any:
        if key.startswith("c/0/"):
            release.wait(10)  # row 0's shards are being stored until the test lets them
        stored.append(key)
        return put(key, data, **kwargs)

    monkeypatch.setattr(array.store, "put", slow_put)
    fetched = lambda: array.shared.counters.snapshot()["bytes_fetched"]  # noqa: E731
    try:
        before = fetched()
        row0 = Box((0, 0), (CHUNKS[0], SHAPE[1]))
        halves = [Box((r, 0), (r + CHUNKS[0], INNER[1])) for r in (CHUNKS[0], 2 * CHUNKS[0])]
        array.write(row0, seeded(row0, seed=2))  # whole shards: stored ahead, held up
        array.write(halves[0], seeded(halves[0], seed=3))  # an inner chunk of row 1's first shard
        with ThreadPoolExecutor(1) as pool:  # past the dirty limit: waits for row 0 to be stored
            writer = pool.submit(array.write, halves[1], seeded(halves[1], seed=4))
            with pytest.raises(TimeoutError):
                writer.result(timeout=0.3)
            release.set()
            writer.result(timeout=10)
        assert not [key for key in stored if not key.startswith("c/0/")], "a half-written shard was stored"
        assert fetched() == before, "a stored shard was read back for a write"
        array.flush()
        _assert_holds(array, [(row0, 2), (halves[0], 3), (halves[1], 4)])
    finally:
        release.set()
        array.close()


def test_shard_write_backs_share_half_the_cache_a_rebuild_counting_three_shards(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A shard rebuilt around new inner chunks holds three shards' worth of memory while it is
    stored, one written all new only one. With half the cache room for 4 shards: a row of 3
    new shards is stored at once, rebuilds one at a time, and beside a rebuild one new shard."""
    array = local_array(tmp_path, sharded=True, cache_bytes=8 * CHUNK_BYTES)
    put = array.store.put
    lock, release = threading.Lock(), threading.Event()
    busy, most = [0], [0]

    def held_put(key: str, data: Any, **kwargs: Any) -> Any:
        with lock:
            busy[0] += 1
            most[0] = max(most[0], busy[0])
        release.wait(10)
        with lock:
            busy[0] -= 1
        return put(key, data, **kwargs)

    monkeypatch.setattr(array.store, "put", held_put)

    def most_at_once(store: Any, expected: int) -> int:
        """The most puts under way at once while `store` runs: each is held until `expected`
        have started, and 0.3 s more, time for more to start were they allowed to."""
        most[0] = 0
        release.clear()
        with ThreadPoolExecutor(1) as pool:
            done = pool.submit(store)
            try:
                wait_until(lambda: most[0] >= expected or done.done(), timeout=5,
                           what=f"{expected} puts under way at once")
                # Not a synchronization: nothing tells of a put that is not started, so the
                # puts beyond the limit are given this long to show up, were they allowed to.
                time.sleep(0.3)
            finally:
                release.set()
            done.result(timeout=10)
        return most[0]

    try:
        row0 = Box((0, 0), (CHUNKS[0], SHAPE[1]))  # 3 shards, every inner chunk new
        assert most_at_once(lambda: write_seeded(array, row0, 1), 3) == 3
        row1 = Box((CHUNKS[0], 0), (2 * CHUNKS[0], SHAPE[1]))
        write_seeded(array, row1, 2)  # stored: rebuilding a shard of it reads it back
        halves = [Box((CHUNKS[0], c), (2 * CHUNKS[0], c + INNER[1])) for c in range(0, SHAPE[1], CHUNKS[1])]
        for half in halves:  # one inner chunk of each of row 1's 3 shards
            array.write(half, seeded(half, seed=3))
        assert most_at_once(array.flush, 1) == 1

        def rebuild_and_new_row() -> None:
            array.write(halves[0], seeded(halves[0], seed=4))
            with ThreadPoolExecutor(1) as pool:
                rebuild = pool.submit(array.flush)
                wait_until(lambda: busy[0] >= 1, timeout=5, what="the rebuild's put under way")
                write_seeded(array, row0, 5)
                rebuild.result(timeout=10)

        assert most_at_once(rebuild_and_new_row, 2) == 2
        _assert_holds(array, [(row0, 5), (halves[0], 4)] + [(half, 3) for half in halves[1:]])
    finally:
        release.set()
        array.close()
