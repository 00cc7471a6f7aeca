"""Where a read chunk is decoded (zarrfs.array.reads.policy), the one place that decides,
asked of real arrays' chunk I/O and real slabs in shared memory, without FUSE."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers.local_arrays import create_zstd_array
from zarrfs.array import ZarrArray
from zarrfs.array.decoding import SharedSlab, SlabKeeper
from zarrfs.array.reads.policy import PROCESS_CHUNK_BYTES, SMALL_CHUNK_BYTES, DecodePolicy, Lane
from zarrfs.array.stored import chunk_io
from zarrfs.array_metadata import open_array
from zarrfs.grid import Box
from zarrfs.store import Store

pytestmark = pytest.mark.fast


@pytest.fixture
def array(tmp_path: Path) -> Iterator[ZarrArray]:
    create_zstd_array(tmp_path, np.arange(64 * 64, dtype="<u2").reshape(64, 64), (16, 16))
    opened = open_array(Store.open(str(tmp_path)), threads=2)
    yield opened
    opened.close()


class Slabs(SlabKeeper):
    """Slabs in shared memory, each let go (its descriptor closed) when the test ends."""

    def __init__(self) -> None:
        super().__init__(lambda slab: slab.close())
        self.made: list[np.ndarray] = []

    def make(self, nbytes: int) -> np.ndarray:
        self.made.append(super().make(nbytes))
        return self.made[-1]


@pytest.fixture
def keeper() -> Iterator[Slabs]:
    kept = Slabs()
    yield kept
    for buffer in kept.made:
        kept.forgotten(buffer)


def _policy(array: ZarrArray, keeper: Slabs | None, *, round_trips: bool = False,
            files: bool = False) -> DecodePolicy:
    """The policy of chunks the daemon reads (`files`: of chunks the processes read from the
    array's files themselves)."""
    def shared_slab(buffer: Any) -> SharedSlab | None:
        return None if keeper is None else keeper.of(buffer)
    return DecodePolicy(array.io, round_trips, shared_slab, array.source.chunk_files() if files else None)


def test_a_local_plain_array_has_its_chunks_read_from_its_files(array: ZarrArray) -> None:
    files = array.source.chunk_files()
    assert files is not None and files.chunk_shape == (16, 16) and files.elements is None, files
    assert files.keys.key((1, 2)) == "c/1/2"


@pytest.mark.parametrize("chunk_bytes", [1, SMALL_CHUNK_BYTES - 1, PROCESS_CHUNK_BYTES])
def test_chunks_of_any_size_read_from_files_go_to_the_processes(array: ZarrArray, keeper: Slabs,
                                                                chunk_bytes: int) -> None:
    buffer = keeper.make(1 << 20)
    decoding = _policy(array, keeper, files=True).for_stream(chunk_bytes, buffer)
    assert decoding.lane is Lane.FILES and decoding.slab is keeper.of(buffer) and decoding.slab is not None


def test_chunks_read_from_files_decode_here_without_usable_processes(array: ZarrArray) -> None:
    decoding = _policy(array, None, files=True).for_stream(SMALL_CHUNK_BYTES - 1, np.empty(1 << 20, np.uint8))
    assert decoding == type(decoding)(Lane.ONE_THREAD, None)


def test_large_chunks_decode_in_the_processes_into_a_shared_slab(array: ZarrArray, keeper: Slabs) -> None:
    buffer = keeper.make(1 << 20)
    decoding = _policy(array, keeper).for_stream(PROCESS_CHUNK_BYTES, buffer)
    assert decoding.lane is Lane.PROCESSES
    assert decoding.slab is keeper.of(buffer) and decoding.slab is not None


def test_without_usable_processes_large_chunks_decode_on_the_loader_threads(array: ZarrArray) -> None:
    """No process could be started (or the slab is the daemon's memory): the same reads, here."""
    decoding = _policy(array, None).for_stream(PROCESS_CHUNK_BYTES, np.empty(1 << 20, np.uint8))
    assert decoding == type(decoding)(Lane.LOADERS, None)


def test_an_array_decoded_only_here_never_goes_to_the_processes(array: ZarrArray, keeper: Slabs,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(array.io, "decoder", None)  # (as a rectilinear grid's chunk I/O has)
    decoding = _policy(array, keeper).for_stream(PROCESS_CHUNK_BYTES, keeper.make(1 << 20))
    assert decoding.lane is Lane.LOADERS and decoding.slab is None


@pytest.mark.parametrize(("chunk_bytes", "round_trips", "lane"), [
    (SMALL_CHUNK_BYTES - 1, False, Lane.ONE_THREAD),
    (SMALL_CHUNK_BYTES - 1, True, Lane.LOADERS),  # (a remote store's loads want every loader)
    (SMALL_CHUNK_BYTES, False, Lane.LOADERS),
    (PROCESS_CHUNK_BYTES - 1, False, Lane.LOADERS),
])
def test_smaller_chunks(array: ZarrArray, keeper: Slabs, chunk_bytes: int, round_trips: bool,
                        lane: Lane) -> None:
    decoding = _policy(array, keeper, round_trips=round_trips).for_stream(chunk_bytes, keeper.make(1 << 20))
    assert decoding.lane is lane and decoding.slab is None


def test_the_one_thread_lane_holds_while_the_chunks_decode_cheaply(array: ZarrArray,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chunk_io, "MEASURED_DECODES", 4)
    policy = _policy(array, None)
    assert policy.stays_on_one_thread(), "counted as cheap before any was measured"
    monkeypatch.setattr(chunk_io, "CHEAP_DECODE_SECONDS", 0.0)
    array.read(Box((0, 0), (64, 64)))  # (16 chunks decoded, each taking more than no time)
    assert not policy.stays_on_one_thread()
