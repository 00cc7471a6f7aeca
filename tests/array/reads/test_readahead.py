"""Reading ahead of a sequential reader (zarrfs.array.reads.readahead, zarrfs.array.reads.streaming),
without FUSE: slabs decoded ahead are served as they are, never once anything changed, give
their share of the cache back when closed, and stay within it however many readers stream."""

from __future__ import annotations

import threading
import weakref
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers.local_arrays import create_zstd_array
from zarrfs.array import ZarrArray
from zarrfs.array.reads import policy, readahead, slab_layout
from zarrfs.array.reads.readahead import Readahead
from zarrfs.array.stored import chunk_io
from zarrfs.array_metadata import create_array, open_array
from zarrfs.errors import ChunkError
from zarrfs.formats.v3 import metadata_from_json
from zarrfs.grid import Box
from zarrfs.store import Store
from zarrfs.views import RegionFile
from zarrfs.views.headered import HeaderedFile
from zarrfs.views.headers.formats import npy_header

pytestmark = [pytest.mark.fast, pytest.mark.usefixtures("stream_threads")]

SHAPE = (256, 192)
CHUNKS = (32, 64)
ROW = SHAPE[1] * 2  # bytes per row of uint16
SLAB = CHUNKS[0] * ROW  # one row of chunks per slab (SLAB_BYTES is patched down to it)
VALUES = np.arange(np.prod(SHAPE), dtype="<u2").reshape(SHAPE) * 7


@pytest.fixture(autouse=True)
def small_slabs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slab_layout, "SLAB_BYTES", SLAB)
    monkeypatch.setattr(readahead, "STREAK_BYTES", 4096)  # slabs after one read in order


def _create(path: Path, cache_bytes: int = 64 << 20) -> ZarrArray:
    create_zstd_array(path, VALUES, CHUNKS)
    return open_array(Store.open(str(path)), cache_bytes=cache_bytes, threads=2)


@pytest.fixture
def array(tmp_path: Path) -> Any:
    opened = _create(tmp_path)
    yield opened
    opened.close()


def _slab(reader: Readahead, index: int) -> Any:
    stream = reader.slabs()[index]
    assert stream.wait(), "the slab did not finish"
    return stream


def _expected(offset: int, size: int, values: np.ndarray = VALUES) -> bytes:
    return values.tobytes()[offset : offset + size]


@pytest.mark.parametrize("byteorder", ["little", "big"])
def test_a_sequential_reader_is_answered_from_slabs_decoded_once(array: ZarrArray, byteorder: str) -> None:
    """In either byte order: the other's slabs are swapped as chunks are copied in."""
    reader = RegionFile(array, None, byteorder).readahead()
    got = bytearray(reader.read(0, 4096))
    _slab(reader, 1)
    position, answered_at_once = len(got), 0
    while position < VALUES.nbytes:
        ready = reader.ready(position, 5000)
        answered_at_once += ready is not None
        piece = ready if ready is not None else reader.read(position, 5000)
        got += bytes(piece)
        position += len(piece)
    reader.close()
    assert bytes(got) == VALUES.astype(">u2" if byteorder == "big" else "<u2").tobytes()
    assert answered_at_once > VALUES.nbytes // 5000 // 2, "slabs ahead did not answer at once"
    chunks = (SHAPE[0] // CHUNKS[0]) * (SHAPE[1] // CHUNKS[1])
    assert array.stats.loads == chunks, "a chunk was decoded more than once"


def test_slabs_started_ahead_are_offered_to_push_while_they_are_held(array: ZarrArray) -> None:
    """The slabs a sequential reader starts ahead of it (`take_ahead`, what the fuse layer
    pushes into the page cache): each once, where it lies in the file; those nobody took are
    kept only while their slab is (a reader of a whole file that nothing pushes for holds a
    few, not one a slab it passed)."""
    reader = RegionFile(array, None).readahead()
    reader.read(0, 4096)
    _slab(reader, 1)
    taken, held = reader.take_ahead(), reader.slabs()
    assert taken and all(a.offset > 0 and a.offset % SLAB == 0 and a.size == SLAB for a in taken)
    assert all(a.slab is held[a.offset // SLAB] for a in taken)
    assert not reader.take_ahead()
    position = 4096
    while position < VALUES.nbytes:
        position += len(reader.read(position, 5000))
    held = reader.slabs()
    left = reader.take_ahead()
    assert left and all(any(a.slab is slab for slab in held.values()) for a in left)
    assert len(left) <= len(held) < VALUES.nbytes // SLAB
    reader.close()
    assert not reader.take_ahead()


@pytest.mark.parametrize("remote", [False, True])
def test_a_first_read_at_the_start_of_a_local_file_starts_slabs(tmp_path: Path, remote: bool,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Every chunk of the first slab is decoded to answer a first read at the file's start,
    however small: from a local store into that slab (those ahead once the reader reads on),
    not into the cache; from a remote one a reader first earns the requests reading ahead
    costs."""
    monkeypatch.setattr(readahead, "STREAK_BYTES", 64 << 10)  # (less than the file, 96 KiB)
    array = _create(tmp_path)
    try:
        reader = RegionFile(array, None, remote=remote).readahead()
        assert bytes(reader.read(0, 4096)) == _expected(0, 4096)
        first_row = Box((0, 0), (CHUNKS[0], SHAPE[1]))
        if remote:
            assert not reader.slabs() and array.cached([first_row])
        else:
            assert set(reader.slabs()) == {0}
            assert not array.cached([first_row]), "the first read filled the cache"
            assert bytes(reader.read(4096, 4096)) == _expected(4096, 4096)
            assert set(reader.slabs()) == set(range(readahead.SLABS_AHEAD + 1))
        reader.close()
    finally:
        array.close()


def test_a_reader_that_jumps_about_starts_no_slabs(array: ZarrArray,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(readahead, "STREAK_BYTES", 3 * 4096)
    monkeypatch.setattr(readahead, "SEQUENTIAL_SLACK", 0)  # (the whole file is within 4 MiB)
    reader = RegionFile(array, None).readahead()
    for offset in (5 * SLAB, 2 * SLAB + 8192, 7 * SLAB, 7 * SLAB + 4096):  # never 3 pages in order
        assert bytes(reader.read(offset, 4096)) == _expected(offset, 4096)
        assert not reader.slabs(), f"a read at {offset} started slabs"
    reader.read(7 * SLAB + 8192, 4096)  # the third page in order
    assert set(reader.slabs()) == {7}
    reader.close()


def test_requests_out_of_order_inside_the_slabs_keep_them(array: ZarrArray,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # The kernel's readahead has several requests in flight; they may arrive further apart
    # than the slack, one in the next slab before the last ones of the slab before.
    monkeypatch.setattr(readahead, "SEQUENTIAL_SLACK", 0)
    reader = RegionFile(array, None).readahead()
    reader.read(0, 4096)
    first = {index: _slab(reader, index) for index in range(readahead.SLABS_AHEAD + 1)}
    loads = array.stats.loads
    ahead = SLAB + 8192
    assert bytes(reader.read(ahead, 4096)) == _expected(ahead, 4096)
    behind = SLAB - 4096
    answered = reader.ready(behind, 4096)
    assert answered is not None, "the slab behind was dropped"
    assert bytes(answered) == _expected(behind, 4096)
    assert all(reader.slabs()[index] is stream for index, stream in first.items()), "a slab was restarted"
    _slab(reader, readahead.SLABS_AHEAD + 1)
    assert array.stats.loads == loads + SHAPE[1] // CHUNKS[1], "only the next slab was decoded"
    reader.close()


@pytest.mark.parametrize("through", ["data", "data.npy", "chunk file", "array"])
def test_a_write_through_any_view_makes_slabs_stale(array: ZarrArray, through: str) -> None:
    data = RegionFile(array, None)
    reader = data.readahead()
    reader.read(0, 4096)
    _slab(reader, 1)
    assert reader.ready(SLAB, 4096) is not None
    new = np.full((2, SHAPE[1]), 9, dtype="<u2")
    row = CHUNKS[0] + 3  # inside slab 1
    if through == "data":
        RegionFile(array, None).write(row * ROW, new.tobytes())
    elif through == "data.npy":
        header = npy_header(np.dtype("<u2"), SHAPE, False)
        assert header is not None
        HeaderedFile(RegionFile(array, None), lambda: header).write(len(header) + row * ROW, new.tobytes())
    elif through == "chunk file":
        chunk = RegionFile(array, Box((CHUNKS[0], 0), (2 * CHUNKS[0], CHUNKS[1])), direct_io=True)
        chunk.write(3 * CHUNKS[1] * 2, new[:, : CHUNKS[1]].tobytes())
        new[:, CHUNKS[1]:] = VALUES[row : row + 2, CHUNKS[1]:]
    else:
        array.write(Box((row, 0), (row + 2, SHAPE[1])), new)
    expected = VALUES.copy()
    expected[row : row + 2] = new
    assert reader.ready(SLAB, 4096) is None, "a slab made before the write answered after it"
    assert bytes(reader.read(row * ROW, 2 * ROW)) == _expected(row * ROW, 2 * ROW, expected)
    reader.close()


def test_npy_reader_reads_header_and_body_through_slabs(array: ZarrArray) -> None:
    header = npy_header(np.dtype("<u2"), SHAPE, False)
    assert header is not None
    npy = HeaderedFile(RegionFile(array, None), lambda: header)
    reader = npy.readahead()
    whole = header + VALUES.tobytes()
    position, got = 0, bytearray()
    while position < len(whole):
        piece = reader.ready(position, 4096) or reader.read(position, 4096)
        got += bytes(piece)
        position += len(piece)
    reader.close()
    assert bytes(got) == whole


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
        assert bytes(piece) == _expected(position, 8192)
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
    assert bytes(held[0]) == _expected(0, 8192), "the reply's bytes were overwritten"
    assert all(ref() is not buffers[0]() for ref in buffers[1:]), "its buffer went to another slab"
    reader.close()


def test_a_slab_closed_while_a_reader_waits_for_it_is_read_again(array: ZarrArray) -> None:
    reader = RegionFile(array, None).readahead()
    reader.read(0, 4096)
    _slab(reader, 1).close()  # as a reader's request that moved on would, meanwhile
    assert reader.slabs()[1].piece(0, 4096) is None
    assert bytes(reader.read(SLAB, 4096)) == _expected(SLAB, 4096)
    reader.close()


def test_buffers_ahead_stay_within_their_share_of_the_cache(tmp_path: Path) -> None:
    array = _create(tmp_path, cache_bytes=8 * SLAB)  # room for 2 slabs ahead, in all
    try:
        readers = [RegionFile(array, None).readahead() for _ in range(6)]
        highest = 0
        for position in range(0, VALUES.nbytes, 8192):
            for reader in readers:
                piece = reader.ready(position, 8192) or reader.read(position, 8192)
                assert bytes(piece) == _expected(position, 8192)
                highest = max(highest, array.cache.reserved_bytes)
                assert array.cache.total_bytes <= array.cache.capacity
        assert 0 < highest <= array.cache.reserve_limit
        for reader in readers:
            reader.close()
    finally:
        array.close()


def test_a_corrupt_chunk_fails_only_its_own_rows(tmp_path: Path) -> None:
    array = _create(tmp_path)
    (tmp_path / "c" / "1" / "2").write_bytes(b"not zstd")
    try:
        reader = RegionFile(array, None).readahead()
        assert bytes(reader.read(0, 4096)) == _expected(0, 4096)
        with pytest.raises(ChunkError):
            reader.read(SLAB, 4096)
        assert bytes(reader.read(2 * SLAB, 4096)) == _expected(2 * SLAB, 4096)
        reader.close()
    finally:
        array.close()


def test_readers_on_threads_see_one_version_of_every_write(array: ZarrArray) -> None:
    """Writers set whole rows to one value while readers stream: within each chunk, every row
    a reader gets is as stored or as one write left it, never half of a write."""
    stop = threading.Event()
    failures: list[str] = []

    def write() -> None:
        value = 1
        while not stop.is_set():
            row = (value * 37) % SHAPE[0]
            array.write(Box((row, 0), (row + 1, SHAPE[1])), np.full((1, SHAPE[1]), value, "<u2"))
            value += 1

    def stream() -> None:
        for _ in range(5):
            reader = RegionFile(array, None).readahead()
            position, got = 0, bytearray()
            while position < VALUES.nbytes:
                piece = reader.ready(position, 6144) or reader.read(position, 6144)
                got += bytes(piece)
                position += len(piece)
            reader.close()
            rows = np.frombuffer(bytes(got), "<u2").reshape(SHAPE)
            for index, row in enumerate(rows):
                for start in range(0, SHAPE[1], CHUNKS[1]):
                    part, stored = row[start : start + CHUNKS[1]], VALUES[index, start : start + CHUNKS[1]]
                    if not (part == part[0]).all() and not (part == stored).all():
                        failures.append(f"row {index} at {start} mixes two versions")

    writer = threading.Thread(target=write)
    readers = [threading.Thread(target=stream) for _ in range(2)]
    writer.start()
    for thread in readers:
        thread.start()
    for thread in readers:
        thread.join()
    stop.set()
    writer.join()
    assert not failures, failures[:5]


@pytest.mark.parametrize(("chunk_bytes", "cheap", "measured", "expected"), [
    (4096, True, 8, ["lane", "lane"]),
    (32 << 10, True, 8, ["loaders", "loaders"]),
    (4096, False, 8, ["lane", "loaders"]),
    (4096, False, 3, ["both", "loaders"]),  # the jobs after the third go to the loaders
])
def test_streams_of_small_chunks_that_decode_cheaply_are_decoded_by_one_thread(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk_bytes: int, cheap: bool,
        measured: int, expected: list[str]) -> None:
    """Its share of the interpreter lock is all such a chunk needs; a second thread at it
    only hands the lock back and forth. Small chunks count as cheap until some were decoded."""
    monkeypatch.setattr(policy, "SMALL_CHUNK_BYTES", 32 << 10)
    monkeypatch.setattr(chunk_io, "MEASURED_DECODES", measured)
    monkeypatch.setattr(chunk_io, "CHEAP_DECODE_SECONDS", 1.0 if cheap else 0.0)
    chunks = (chunk_bytes // (CHUNKS[1] * 2), CHUNKS[1])
    values = np.arange(2 * chunks[0] * 4 * chunks[1], dtype="<u2").reshape(2 * chunks[0], 4 * chunks[1])
    doc = {
        "zarr_format": 3, "node_type": "array", "shape": list(values.shape), "data_type": "uint16",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunks)}},
        "chunk_key_encoding": {"name": "default"}, "fill_value": 0,
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
    }
    created = create_array(Store.open(str(tmp_path)), metadata_from_json(doc), threads=2)
    created.write(Box((0, 0), values.shape), values)
    created.flush()
    created.close()
    array = open_array(Store.open(str(tmp_path)), threads=2)
    threads: set[str] = set()
    real = array.source.for_stream

    def noting_the_thread(*args: Any) -> Any:
        threads.add(threading.current_thread().name)
        return real(*args)

    monkeypatch.setattr(array.source, "for_stream", noting_the_thread)
    monkeypatch.setitem(policy.JOB_BYTES, policy.Lane.ONE_THREAD, 1)  # a job per chunk: 8 jobs
    monkeypatch.setitem(policy.JOB_BYTES, policy.Lane.LOADERS, 1)
    seen = []
    try:
        for _ in range(2):  # the first decodes the 8 chunks whose cost decides the second
            threads.clear()
            stream = array.stream(Box((0, 0), values.shape))
            assert stream is not None and stream.wait(), "the stream failed"
            assert stream.out is not None and np.array_equal(stream.out, values)
            stream.close()
            seen.append(set(threads))
    finally:
        array.close()
    def where(names: set[str]) -> str:
        lane = {"zarrfs-decode-small_0"} & names
        loaders = {name for name in names if name.startswith("zarrfs-decode_")}
        assert names == lane | loaders and names, names
        return "both" if lane and loaders else "lane" if lane else "loaders"

    assert [where(names) for names in seen] == expected
