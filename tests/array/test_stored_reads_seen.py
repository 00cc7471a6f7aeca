"""The stored bytes a view reads as they are (data.tif's tiles, data.h5's chunks:
`read_stored_unit`, `read_chunk_now`) are seen as a load's are: their generation noted, so a
recheck finds another writer's change to them, and a read that finds a generation other than
the one seen (the object read again after another writer changed it) changes the array's
`changes` (what `zarrfs serve` derives its ETags from, and what made files follow). Reads of
what did not change leave `changes` as it was."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import zarr

from zarrfs.array import ZarrArray
from zarrfs.array_metadata import open_array
from zarrfs.store import Store

pytestmark = pytest.mark.fast


def made(path: Path, *, sharded: bool) -> zarr.Array:
    written = zarr.create_array(path, shape=(64, 64), chunks=(16, 16), shards=(32, 32) if sharded else None,
                                dtype="u1", fill_value=0, compressors=[zarr.codecs.ZstdCodec(level=1)])
    written[...] = np.arange(64 * 64, dtype="u1").reshape(64, 64)
    return written


def opened(path: Path) -> ZarrArray:
    return open_array(Store.open(str(path)), threads=1)


@pytest.mark.parametrize("sharded", [False, True], ids=["plain", "sharded"])
@pytest.mark.parametrize("how", ["read_stored_unit", "read_chunk_now"])
def test_a_recheck_finds_another_writers_change_to_bytes_read_as_stored(tmp_path: Path, sharded: bool,
                                                                         how: str) -> None:
    written = made(tmp_path / "a.zarr", sharded=sharded)
    array = opened(tmp_path / "a.zarr")
    try:
        into = memoryview(bytearray(1 << 16))
        read = (lambda: array.read_stored_unit((1, 1))) if how == "read_stored_unit" else \
            (lambda: array.read_chunk_now((1, 1), into))
        assert read() is not None
        before = array.changes
        assert not array.recheck() and array.changes == before  # (nothing changed: nothing new)
        written[16:32, 16:32] = 200  # (another writer: the chunk, or the shard holding it)
        changes = array.recheck()
        assert changes.chunks == {(0, 0) if sharded else (1, 1)}
        assert array.changes != before
    finally:
        array.close()


@pytest.mark.parametrize("sharded", [False, True], ids=["plain", "sharded"])
def test_a_read_that_finds_a_new_generation_is_a_change(tmp_path: Path, sharded: bool) -> None:
    written = made(tmp_path / "a.zarr", sharded=sharded)
    array = opened(tmp_path / "a.zarr")
    try:
        first = bytes(array.read_stored_unit((1, 1)) or b"")
        before = array.changes
        assert bytes(array.read_stored_unit((1, 1)) or b"") == first and array.changes == before
        written[16:32, 16:32] = 200
        assert bytes(array.read_stored_unit((1, 1)) or b"") != first
        assert array.changes != before  # (no recheck asked: the read itself saw it)
    finally:
        array.close()
