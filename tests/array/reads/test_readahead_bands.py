"""Reading ahead where a row of chunks is larger than a slab may be (a volume of 64-deep chunks,
whose planes a reader of `data` reads one after another): slabs of a few rows each, every one
decoding the chunks of its row; each chunk decoded once a slab, not once a read of it through a
cache too small to hold the row (zarrfs.array.reads.readahead, without FUSE)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.helpers.local_arrays import create_zstd_array
from zarrfs.array import ZarrArray
from zarrfs.array.reads import readahead, slab_layout
from zarrfs.array_metadata import open_array
from zarrfs.store import Store
from zarrfs.views import RegionFile

pytestmark = [pytest.mark.fast, pytest.mark.usefixtures("stream_threads")]

SHAPE = (128, 96, 64)
CHUNKS = (32, 32, 32)
PLANE = SHAPE[1] * SHAPE[2] * 2  # bytes of one index of the first axis (uint16)
VALUES = (np.arange(np.prod(SHAPE), dtype="<u2") * 3).reshape(SHAPE)
CHUNK_COUNT = 4 * 3 * 2


def _opened(path: Path) -> ZarrArray:
    create_zstd_array(path, VALUES, CHUNKS)
    return open_array(Store.open(str(path)), cache_bytes=64 << 20, threads=2)


def _read_in_order(array: ZarrArray, size: int = 5000) -> bytes:
    reader = RegionFile(array, None, remote=False).readahead()
    got, position = bytearray(), 0
    try:
        while position < VALUES.nbytes:
            piece = reader.ready(position, size)
            piece = piece if piece is not None else reader.read(position, size)
            got += bytes(piece)
            position += len(piece)
    finally:
        reader.close()
    return bytes(got)


@pytest.mark.parametrize(("most_bytes", "decoded_each"), [(8 * PLANE, 4), (17 * PLANE, 2), (32 * PLANE, 1)])
def test_a_row_of_chunks_larger_than_a_slab_is_read_in_bands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               most_bytes: int, decoded_each: int) -> None:
    """Slabs of as many planes as fit and divide a row of chunks evenly (8 of 32, then 16 of
    32 where 17 would fit, then the whole row): each chunk is decoded once a band."""
    monkeypatch.setattr(slab_layout, "MAX_SLAB_BYTES", most_bytes)
    monkeypatch.setattr(slab_layout, "BAND_SLABS", 1)
    monkeypatch.setattr(readahead, "STREAK_BYTES", 4096)
    array = _opened(tmp_path)
    try:
        assert _read_in_order(array) == VALUES.tobytes()
        assert array.stats.loads == CHUNK_COUNT * decoded_each
    finally:
        array.close()


def test_bands_fit_the_share_of_the_cache_slabs_have(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """However large a slab may be, two bands fit in what the readers' slabs may hold (one being
    read, one being filled ahead of it)."""
    monkeypatch.setattr(slab_layout, "MAX_SLAB_BYTES", 16 * PLANE)  # (a row of chunks is 32 planes)
    monkeypatch.setattr(readahead, "STREAK_BYTES", 4096)
    create_zstd_array(tmp_path, VALUES, CHUNKS)
    array = open_array(Store.open(str(tmp_path)), cache_bytes=32 * PLANE, threads=2)
    try:
        assert array.slab_bytes == 8 * PLANE  # (a quarter of the cache)
        reader = RegionFile(array, None, remote=False).readahead()
        assert bytes(reader.read(0, 4096)) == VALUES.tobytes()[:4096]
        assert bytes(reader.read(4096, 4096)) == VALUES.tobytes()[4096:8192]
        held = reader.slabs()
        assert set(held) == {0, 1}
        for index, slab in held.items():
            assert slab.wait()
            band = slab.piece(0, VALUES.nbytes)
            assert band is not None and bytes(band) == VALUES[4 * index : 4 * index + 4].tobytes()
        reader.close()
        assert _read_in_order(array) == VALUES.tobytes()
    finally:
        array.close()


def test_a_plane_larger_than_a_slab_is_read_through_the_cache(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slab_layout, "MAX_SLAB_BYTES", PLANE - 1)
    monkeypatch.setattr(readahead, "STREAK_BYTES", 4096)
    array = _opened(tmp_path)
    try:
        reader = RegionFile(array, None, remote=False).readahead()
        assert bytes(reader.read(0, 4096)) == VALUES.tobytes()[:4096]
        assert bytes(reader.read(4096, 4096)) == VALUES.tobytes()[4096:8192]
        assert not reader.slabs()
        reader.close()
    finally:
        array.close()


def test_a_remote_store_reads_such_rows_through_the_cache(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A band costs every chunk of its row: where reading ahead is priced in requests (a remote
    store), a reader in order is not made to wait for them; it reads through the cache."""
    monkeypatch.setattr(slab_layout, "MAX_SLAB_BYTES", 8 * PLANE)
    monkeypatch.setattr(readahead, "STREAK_BYTES", 4096)
    array = _opened(tmp_path)
    try:
        reader = RegionFile(array, None, remote=True).readahead()
        got, position = bytearray(), 0
        while position < 4 * PLANE:
            piece = reader.read(position, 5000)
            got += bytes(piece)
            position += len(piece)
            assert not reader.slabs()
        reader.close()
        assert bytes(got) == VALUES.tobytes()[:position]
    finally:
        array.close()
