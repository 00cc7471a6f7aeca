"""The interop matrix through a real mount, reads: every case TensorStore can write is written
by TensorStore, mounted with `zarrfs mount -f`, and read through `data` and `chunks/` with
ordinary system calls (read, pread, O_DIRECT pread, mmap).

Each array is mounted once, and all its read checks share that mount. The daemons are
forked from a server that has already imported zarrfs (`zarrfs_command`, tests/interop/
conftest.py): starting the script costs more than everything a test checks.
"""

from __future__ import annotations

import mmap
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.interop_cases import CASES
from tests.helpers.interop_docs import chunk_key
from tests.helpers.interop_io import read_tensorstore
from tests.helpers.interop_model import Case
from tests.helpers.interop_mounts import (
    assert_clean_log,
    assert_same_bytes,
    chunk_slices,
    seed,
    with_overhang,
)
from tests.helpers.interop_values import bits
from tests.helpers.mounting import Mount, without_views

pytestmark = pytest.mark.skipif(
    sys.byteorder != "little", reason="the expected file bytes are the host's element bytes"
)


TENSORSTORE_CASES = [c for c in CASES if c.tensorstore]


MAX_CHUNK_FILES = 16  # chunk files read per array (all of them in today's matrix)


def _sample_chunks(case: Case, rng: np.random.Generator) -> list[tuple[int, ...]]:
    chunks = case.grid(case.chunk_shape)
    if len(chunks) <= MAX_CHUNK_FILES:
        return list(chunks)
    middle = rng.choice(len(chunks) - 2, MAX_CHUNK_FILES - 2, replace=False) + 1
    return [chunks[0], *(chunks[int(i)] for i in sorted(middle)), chunks[-1]]


def _ranges(rng: np.random.Generator, size: int, count: int) -> Iterator[tuple[int, int]]:
    """(offset, length) pairs: random, mostly unaligned, some running past the end."""
    yield 0, size + 3
    yield size, 4
    for _ in range(count):
        offset = int(rng.integers(0, size + 1))
        yield offset, int(rng.integers(1, size - offset + 5))


# -- reading -----------------------------------------------------------------------------------


@pytest.mark.fast
@pytest.mark.parametrize("case", TENSORSTORE_CASES, ids=lambda c: c.id)
def test_reads_match_tensorstore(case: Case, prepared: tuple[Mount, Path]) -> None:
    mount, path = prepared
    written, fill = read_tensorstore(str(path))
    expected = bits(written).tobytes()
    size = len(expected)
    rng = np.random.default_rng(seed(case))

    assert (mount.path / "zarr.json").read_bytes() == (path / "zarr.json").read_bytes()
    assert mount.data.stat().st_size == size

    # O_DIRECT: each pread reaches the daemon with its own offset and length.
    fd = os.open(mount.data, os.O_RDONLY | os.O_DIRECT)
    try:
        for offset, length in _ranges(rng, size, 24):
            assert_same_bytes(os.pread(fd, length, offset), expected[offset : offset + length],
                               f"O_DIRECT pread({length}, {offset})")
    finally:
        os.close(fd)
    # Through the page cache, starting cold: the kernel reads ahead around each pread.
    fd = os.open(mount.data, os.O_RDONLY)
    try:
        for offset, length in _ranges(rng, size, 12):
            assert_same_bytes(os.pread(fd, length, offset), expected[offset : offset + length],
                               f"pread({length}, {offset})")
    finally:
        os.close(fd)

    assert_same_bytes(mount.data.read_bytes(), expected, "data read whole")
    if size:
        with open(mount.data, "rb") as f, mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as mapped:
            assert_same_bytes(mapped[:], expected, "mmap of data")

    padded = with_overhang(case, written, fill)
    itemsize = written.dtype.itemsize
    for index in _sample_chunks(case, rng):
        key = chunk_key(case.doc, index)
        chunk = bits(padded[chunk_slices(case, index)]).tobytes()
        file = mount.chunk(key)
        assert file.stat().st_size == len(chunk), key
        assert_same_bytes(file.read_bytes(), chunk, f"chunks/{key}")
        offset = int(rng.integers(0, len(chunk)))
        length = int(rng.integers(1, len(chunk) - offset + 1))
        if itemsize > 1 and length > 1 and offset % itemsize == 0:
            offset, length = offset + 1, length - 1
        fd = os.open(file, os.O_RDONLY | os.O_DIRECT)
        try:
            assert_same_bytes(os.pread(fd, length, offset), chunk[offset : offset + length],
                               f"O_DIRECT pread({length}, {offset}) of chunks/{key}")
        finally:
            os.close(fd)
    assert without_views(os.listdir(mount.path)) == ["chunks", "data", "zarr.json"]
    assert_clean_log(mount)
