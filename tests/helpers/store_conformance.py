"""What every store that writes conditionally must do (S3, GCS, Azure): one sequence of puts,
reads and deletes against the generations it hands out, run against each store's server; and
one write through a mount of an array there."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.two_writers import Writer
from zarrfs.errors import ConflictError
from zarrfs.store import ByteRange, Store


def assert_compare_and_swap(store: Store) -> None:
    """A put or delete that expects a generation (None: no object) happens only then; reads
    give the generation of what they read; a range past the end is empty."""
    assert store.capabilities.versioned and store.capabilities.conditional
    first = store.put("k", b"first", expect=None)
    with pytest.raises(ConflictError):
        store.put("k", b"again", expect=None)  # must not exist: it does
    found = store.read("k")
    assert found is not None and (found.data, found.generation) == (b"first", first)
    assert store.generation("k") == first
    assert store.generations(["k", "a", "b", "c", "d"])["k"] == first  # one listing
    second = store.put("k", b"second", expect=first)
    assert second != first
    with pytest.raises(ConflictError):
        store.put("k", b"stale", expect=first)  # a writer that read `first`
    ranged = store.read("k", ByteRange(1, 3))
    assert ranged is not None and (ranged.data, ranged.generation) == (b"eco", second)
    past_end = store.read("k", ByteRange(100, 4))
    assert past_end is not None and past_end.data == b""
    with pytest.raises(ConflictError):
        store.delete("k", expect=first)
    with pytest.raises(ConflictError):
        store.delete("k", expect=None)
    assert store.get("k") == b"second"
    store.delete("k", expect=second)
    assert store.read("k") is None
    store.delete("k", expect=None)  # absent, as expected
    with pytest.raises(ConflictError):
        store.delete("k", expect=second)  # deleted meanwhile


def write_row_and_block(data: Path, values: np.ndarray) -> np.ndarray:
    """Write row 5 and a 4 x 10 block of 7s at (40, 20) through a mount's `data` (float32, 2-D
    like `values`), fsync: the array's values then."""
    expected = values.copy()
    row = np.linspace(-1, 1, values.shape[1], dtype="<f4")
    expected[5] = row
    expected[40:44, 20:30] = 7
    fd = os.open(data, os.O_WRONLY)
    try:
        os.pwrite(fd, row.tobytes(), 5 * values.shape[1] * 4)
        for i in range(40, 44):
            os.pwrite(fd, np.full(10, 7, "<f4").tobytes(), (i * values.shape[1] + 20) * 4)
        os.fsync(fd)
    finally:
        os.close(fd)
    return expected


def write_in_rounds(a: Writer, b: Writer, values: np.ndarray, rounds: int) -> tuple[np.ndarray, int]:
    """Each round both writers read everything (caching chunk (0, 0)), then A writes one
    element of rows 0-3 and B one of rows 4-7, each fsyncing: B's copy is stale, so its put
    must fail on the generation and merge. Both are closed at the end. The values expected
    and the write conflicts the two mounts counted."""
    expected = values.copy()
    try:
        for r in range(rounds):
            for writer in (a, b):
                os.pread(writer.fd, values.nbytes, 0)
            writes = ((a, (r % 4, r % 8), 1000.0 + r), (b, (4 + r % 4, (r + 3) % 8), 2000.0 + r))
            for writer, (i, j), value in writes:
                os.pwrite(writer.fd, np.float32(value).tobytes(), (i * values.shape[1] + j) * 4)
                expected[i, j] = value
                writer.fsync()
        conflicts = sum(int(w.stats()["write_conflicts"]) for w in (a, b))
    finally:
        a.close()
        b.close()
    return expected, conflicts
