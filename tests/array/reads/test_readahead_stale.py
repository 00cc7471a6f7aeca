"""Reading ahead without FUSE (zarrfs.array.reads.readahead): slabs decoded ahead are never
served once anything changed (a write through any view), readers on threads see one version
of every write, and a corrupt chunk fails only its own rows."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.readahead_slabs import (
    CHUNKS,
    ROW,
    SHAPE,
    SLAB,
    VALUES,
    expected_bytes,
    finished_slab,
    opened_array,
    small_slabs,  # noqa: F401  (autouse: slabs of one row of chunks, in this module only)
)
from zarrfs.array import ZarrArray
from zarrfs.errors import ChunkError
from zarrfs.grid import Box
from zarrfs.views import RegionFile
from zarrfs.views.headered import HeaderedFile
from zarrfs.views.headers.formats import npy_header

pytestmark = [pytest.mark.fast, pytest.mark.usefixtures("stream_threads")]


@pytest.mark.parametrize("through", ["data", "data.npy", "chunk file", "array"])
def test_a_write_through_any_view_makes_slabs_stale(array: ZarrArray, through: str) -> None:
    data = RegionFile(array, None)
    reader = data.readahead()
    reader.read(0, 4096)
    finished_slab(reader, 1)
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
    assert bytes(reader.read(row * ROW, 2 * ROW)) == expected_bytes(row * ROW, 2 * ROW, expected)
    reader.close()


def test_a_corrupt_chunk_fails_only_its_own_rows(tmp_path: Path) -> None:
    array = opened_array(tmp_path)
    (tmp_path / "c" / "1" / "2").write_bytes(b"not zstd")
    try:
        reader = RegionFile(array, None).readahead()
        assert bytes(reader.read(0, 4096)) == expected_bytes(0, 4096)
        with pytest.raises(ChunkError):
            reader.read(SLAB, 4096)
        assert bytes(reader.read(2 * SLAB, 4096)) == expected_bytes(2 * SLAB, 4096)
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
