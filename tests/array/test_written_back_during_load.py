"""A read of a chunk fetches it from the store; meanwhile the store changes. What the read
fetched is then older than the store: it must not go into the cache as the chunk (every read
after it would show the older chunk until it is evicted).

- This mount wrote part of the chunk, wrote it back and evicted it meanwhile. The coherence
  soak (tests/reliability/test_coherence_rounds.py) found this: with cache=2M, a `data` row written
  and read back at once came back without the write, now and then, on a loaded machine.
- Another writer stored the chunk, and a recheck (what an open asks) noticed it meanwhile:
  the recheck takes the new generation as seen, so no later one would notice the older chunk.
- The generation a read fetched must not replace, as seen, a newer one noted meanwhile (this
  mount stored the chunk): the next recheck would take the mount's own write for another
  writer's and drop the chunk.

The races are made on purpose, without FUSE: the read's thread is held between its fetch and
putting the chunk in the cache, through a load and (the first) through a stream, whose buffer
is stale then, as the write-back changed the chunk: its reader reads through the cache."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers.local_arrays import create_zstd_array
from zarrfs.array import ZarrArray
from zarrfs.array_metadata import open_array
from zarrfs.grid import Box
from zarrfs.store import Store

pytestmark = pytest.mark.fast

SHAPE = (64, 96)
CHUNKS = (16, 32)  # uint16: 1 KiB a chunk
CACHE_BYTES = 4 << 10  # room for a few chunks: reading four others evicts a clean one
WRITTEN = Box((1, 4), (2, 20))  # part of one row of chunk (0, 0)
CHUNK = Box((0, 0), CHUNKS)
OTHERS = [Box((16 * i, 32 * j), (16 * i + 16, 32 * j + 32)) for i in (1, 2, 3) for j in (1, 2)]
WAIT = 30.0


def _initial() -> np.ndarray:
    return np.arange(np.prod(SHAPE), dtype="<u2").reshape(SHAPE)


@pytest.fixture
def array(tmp_path: Path) -> Iterator[ZarrArray]:
    create_zstd_array(tmp_path, _initial(), CHUNKS)
    opened = open_array(Store.open(str(tmp_path)), threads=2, cache_bytes=CACHE_BYTES)
    yield opened
    opened.close()


class HeldAfterFetch:
    """Wraps what a read calls once its fetch is done (putting the chunk in the cache, or
    noting its generation): the first call waits until `release`."""

    def __init__(self, then: Callable[..., Any]) -> None:
        self._then = then
        self.fetched = threading.Event()
        self.release = threading.Event()
        self.calls = 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        if self.calls == 1:
            self.fetched.set()
            assert self.release.wait(WAIT)
        return self._then(*args, **kwargs)


def _read_in_thread(array: ZarrArray, how: str) -> tuple[threading.Thread, dict[str, np.ndarray]]:
    got: dict[str, np.ndarray] = {}

    def read() -> None:
        if how == "load":
            got["chunk"] = np.array(array.read(CHUNK))
            return
        stream = array.stream(CHUNK)
        assert stream is not None
        if stream.wait():  # (else stale: the write-back changed the chunk's entry meanwhile)
            assert stream.out is not None
            got["chunk"] = np.array(stream.out)
        stream.close()

    thread = threading.Thread(target=read)
    thread.start()
    return thread, got


@pytest.mark.parametrize("how", ["load", "stream"])
def test_a_chunk_written_back_while_it_is_read_reads_with_the_write(
        array: ZarrArray, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    written = np.full(WRITTEN.shape, 7, dtype="<u2")
    array.write(WRITTEN, written)
    expected = _initial()[:16, :32].copy()
    expected[1:2, 4:20] = written

    held = HeldAfterFetch(array.array_cache.install if how == "load" else array.array_cache.install_lent)
    monkeypatch.setattr(array.array_cache, "install" if how == "load" else "install_lent", held)
    thread, got = _read_in_thread(array, how)
    try:
        assert held.fetched.wait(WAIT), "the read never fetched the chunk"
        array.flush()  # (stores the write: the chunk is clean, and may be evicted)
        for box in OTHERS:
            array.read(box)
        assert not array.cached([CHUNK]), "the chunk written back was not evicted"
    finally:
        held.release.set()
        thread.join(WAIT)
    assert not thread.is_alive()
    if how == "load":
        assert np.array_equal(got["chunk"], expected), "the read lost the write stored meanwhile"
    elif "chunk" in got:  # (a stream used only while current)
        assert np.array_equal(got["chunk"], expected), "the stream lost the write stored meanwhile"
    assert array.cached([CHUNK]) == (how == "load")  # (what a stream fetched again is not kept)
    assert np.array_equal(np.array(array.read(CHUNK)), expected), "the cache lost the write"


def test_a_chunk_another_writer_stored_while_it_was_read_is_not_cached_stale(
        array: ZarrArray, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A recheck (what an open asks) notices the other writer's chunk while a read of the
    older one is between fetch and cache: the cache must end up with the new one, which no
    later recheck would notice otherwise (it has taken the new generation as seen)."""
    theirs = np.full(CHUNKS, 9, dtype="<u2")
    held = HeldAfterFetch(array.array_cache.install)
    monkeypatch.setattr(array.array_cache, "install", held)
    thread, got = _read_in_thread(array, "load")
    try:
        assert held.fetched.wait(WAIT), "the read never fetched the chunk"
        other = open_array(Store.open(str(tmp_path)), threads=2)
        try:
            other.write(CHUNK, theirs)
            other.flush()
        finally:
            other.close()
        assert array.recheck().chunks == {(0, 0)}
    finally:
        held.release.set()
        thread.join(WAIT)
    assert not thread.is_alive() and "chunk" in got
    assert np.array_equal(np.array(array.read(CHUNK)), theirs), "the cache kept the older chunk"
    assert not array.recheck().chunks
    assert np.array_equal(np.array(array.read(CHUNK)), theirs)


def test_a_generation_read_before_a_write_back_does_not_replace_the_stored_one(
        array: ZarrArray, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stream (whose fetches are not cached) reads the chunk; meanwhile this mount writes it
    and stores it. The generation the stream read is the older one: taken as seen, the next
    recheck would count the chunk as changed by another writer and drop what is cached."""
    held = HeldAfterFetch(array.rechecker.seen.note)  # (the stream's: the main thread writes only after)
    monkeypatch.setattr(array.rechecker.seen, "note", held)
    thread, _ = _read_in_thread(array, "stream")
    try:
        assert held.fetched.wait(WAIT), "the stream never fetched the chunk"
        array.write(CHUNK, np.full(CHUNKS, 5, dtype="<u2"))
        array.flush()
    finally:
        held.release.set()
        thread.join(WAIT)
    assert not thread.is_alive() and held.calls >= 2
    assert not array.recheck().chunks, "this mount's own write-back counted as another writer's"
    assert np.array_equal(np.array(array.read(CHUNK)), np.full(CHUNKS, 5, dtype="<u2"))
