"""Reading ahead of a sequential reader (zarrfs.array.reads.readahead, zarrfs.array.reads.streaming),
without FUSE: slabs decoded ahead are served as they are, started by a sequential reader (not
by one that jumps about), kept for requests out of order inside them, offered to push; streams
of small chunks that decode cheaply are decoded by one thread."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
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
from zarrfs.array.reads import policy, readahead
from zarrfs.array.stored import chunk_io
from zarrfs.array_metadata import create_array, open_array
from zarrfs.formats.v3 import metadata_from_json
from zarrfs.grid import Box
from zarrfs.store import Store
from zarrfs.views import RegionFile
from zarrfs.views.headered import HeaderedFile
from zarrfs.views.headers.formats import npy_header

pytestmark = [pytest.mark.fast, pytest.mark.usefixtures("stream_threads")]


@pytest.mark.parametrize("byteorder", ["little", "big"])
def test_a_sequential_reader_is_answered_from_slabs_decoded_once(array: ZarrArray, byteorder: str) -> None:
    """In either byte order: the other's slabs are swapped as chunks are copied in."""
    reader = RegionFile(array, None, byteorder).readahead()
    got = bytearray(reader.read(0, 4096))
    finished_slab(reader, 1)
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
    finished_slab(reader, 1)
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
    array = opened_array(tmp_path)
    try:
        reader = RegionFile(array, None, remote=remote).readahead()
        assert bytes(reader.read(0, 4096)) == expected_bytes(0, 4096)
        first_row = Box((0, 0), (CHUNKS[0], SHAPE[1]))
        if remote:
            assert not reader.slabs() and array.cached([first_row])
        else:
            assert set(reader.slabs()) == {0}
            assert not array.cached([first_row]), "the first read filled the cache"
            assert bytes(reader.read(4096, 4096)) == expected_bytes(4096, 4096)
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
        assert bytes(reader.read(offset, 4096)) == expected_bytes(offset, 4096)
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
    first = {index: finished_slab(reader, index) for index in range(readahead.SLABS_AHEAD + 1)}
    loads = array.stats.loads
    ahead = SLAB + 8192
    assert bytes(reader.read(ahead, 4096)) == expected_bytes(ahead, 4096)
    behind = SLAB - 4096
    answered = reader.ready(behind, 4096)
    assert answered is not None, "the slab behind was dropped"
    assert bytes(answered) == expected_bytes(behind, 4096)
    assert all(reader.slabs()[index] is stream for index, stream in first.items()), "a slab was restarted"
    finished_slab(reader, readahead.SLABS_AHEAD + 1)
    assert array.stats.loads == loads + SHAPE[1] // CHUNKS[1], "only the next slab was decoded"
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
