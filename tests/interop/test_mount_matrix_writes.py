"""The interop matrix through a real mount, writes: a representative subset of the cases
TensorStore writes is written through the mount (pwrite, dd, a shared mapping, a chunk file)
and read back by TensorStore and zarr-python after unmounting (the daemons forked as for the
reads: `zarrfs_command`, tests/interop/conftest.py).
"""

from __future__ import annotations

import math
import mmap
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.interop_cases import CASES
from tests.helpers.interop_docs import chunk_key
from tests.helpers.interop_io import read_tensorstore, read_zarr_python
from tests.helpers.interop_model import EMPTY, Case, expected_keys, model, shard_index, stored_keys
from tests.helpers.interop_mounts import (
    assert_clean_log,
    assert_same_bytes,
    chunk_slices,
    seed,
    with_overhang,
)
from tests.helpers.interop_values import DATA_TYPES, STORAGE, assert_same_bits, bits, random_values
from tests.helpers.mounting import Mount

pytestmark = pytest.mark.skipif(
    sys.byteorder != "little", reason="the expected file bytes are the host's element bytes"
)


BY_ID = {c.id: c for c in CASES}

# Written through the mount: every data type (5x7 in 2x3 chunks, so with edge chunks) and the
# layouts where a write lands in an unusual place in the store.
WRITE_CASE_IDS = [
    *(f"dtype-{dt}" for dt in DATA_TYPES),
    "shard-index-start",
    "shard-index-end",
    "shard-nested",
    "codec-transpose-3d-big-endian",
    "key-v2-dot",
    "key-v2-slash-sharded",
    "fill-float32-nan",
    "fill-float32-nan-payload-sharded",
    "shard-edge-only",
    "chunk-larger-than-array",
    "rank0",
]
WRITE_CASES = [BY_ID[i] for i in WRITE_CASE_IDS]
assert all(c.tensorstore for c in WRITE_CASES)


# -- writing -----------------------------------------------------------------------------------


class Image:
    """The expected contents of `data`, kept as its bytes, with the array view of them."""

    def __init__(self, case: Case, data: np.ndarray) -> None:
        self.case = case
        self.dtype = STORAGE[case.data_type]
        self.bytes = bytearray(bits(data).tobytes())

    def array(self) -> np.ndarray:
        return np.frombuffer(bytes(self.bytes), dtype=self.dtype).reshape(self.case.shape)

    def put(self, offset: int, data: bytes) -> None:
        self.bytes[offset : offset + len(data)] = data

    def put_chunk(self, index: Sequence[int], data: bytes) -> None:
        """What writing a whole chunk file does: its elements inside the array are set."""
        values = np.frombuffer(data, dtype=self.dtype).reshape(self.case.chunk_shape)
        array = self.array().copy()
        region = chunk_slices(self.case, index)
        inside = tuple(slice(0, len(range(*s.indices(n))))
                       for s, n in zip(region, self.case.shape, strict=True))
        array[region] = values[inside]
        self.bytes = bytearray(bits(array).tobytes())


def _payload(case: Case, nbytes: int, rng: np.random.Generator) -> bytes:
    """`nbytes` of valid element bytes (0/1 for bool, -8..7 for int4) starting anywhere in an
    element."""
    itemsize = STORAGE[case.data_type].itemsize
    values = random_values(case.data_type, (nbytes // itemsize + 2,), rng)
    shift = int(rng.integers(0, itemsize))
    return bytes(bits(values).tobytes()[shift : shift + nbytes])


def _range(rng: np.random.Generator, size: int, itemsize: int) -> tuple[int, int]:
    """A random range of at least half the file that starts and ends inside elements."""
    offset = int(rng.integers(0, max(1, size // 2)))
    if itemsize > 1 and offset % itemsize == 0 and size > 2:
        offset += 1
    length = int(rng.integers(max(1, (size - offset) // 2), size - offset + 1))
    if itemsize > 1 and (offset + length) % itemsize == 0 and length > 1:
        length -= 1
    return offset, length


def _pwrite(file: Path, data: bytes, offset: int) -> None:
    """One pwrite, then close (which stores the data)."""
    fd = os.open(file, os.O_WRONLY)
    try:
        assert os.pwrite(fd, data, offset) == len(data)
    finally:
        os.close(fd)


def _store_holds(path: Path, image: Image, step: str) -> None:
    data, _ = read_tensorstore(str(path))
    assert_same_bits(data, image.array(), f"TensorStore reading the store after {step}")


def _mount_shows(mount: Mount, image: Image, step: str) -> None:
    assert_same_bytes(mount.data.read_bytes(), bytes(image.bytes), f"data after {step}")


def _check_shards(case: Case, path: Path, data: np.ndarray) -> None:
    """Each stored shard's index marks exactly the all-fill inner chunks empty."""
    config = case.shard_config
    if config is None:
        return
    fill = bits(case.fill)
    inner_shape = config["chunk_shape"]
    for index in case.grid(case.chunk_shape):
        key = chunk_key(case.doc, index)
        try:
            shard = (path / key).read_bytes()
        except FileNotFoundError:
            continue
        entries = shard_index(case, shard)
        for inner in np.ndindex(*entries.shape[:-1]):
            start = [i * s + j * c for i, s, j, c in
                     zip(index, case.chunk_shape, inner, inner_shape, strict=True)]
            region = data[tuple(slice(a, a + c) for a, c in zip(start, inner_shape, strict=True))]
            all_fill = region.size == 0 or bool((bits(region).reshape(-1, fill.size) == fill).all())
            empty = int(entries[inner][0]) == EMPTY
            assert empty == all_fill, f"shard {key!r} inner chunk {inner}: empty={empty}"


@pytest.mark.fast
@pytest.mark.parametrize("case", WRITE_CASES, ids=lambda c: c.id)
def test_writes_reach_tensorstore_and_zarr(case: Case, prepared: tuple[Mount, Path],
                                           tmp_path: Path) -> None:
    mount, path = prepared
    image = Image(case, model(case))
    _store_holds(path, image, "TensorStore wrote it")
    itemsize = image.dtype.itemsize
    size = len(image.bytes)
    rng = np.random.default_rng(seed(case) + 1)

    # 1. pwrite, starting and ending inside elements, across chunks.
    offset, length = _range(rng, size, itemsize)
    data = _payload(case, length, rng)
    _pwrite(mount.data, data, offset)
    image.put(offset, data)
    _mount_shows(mount, image, "pwrite")
    _store_holds(path, image, "pwrite and close")

    # 2. dd conv=notrunc, 5-byte blocks at a byte offset: partial elements in most writes.
    offset, length = _range(rng, size, itemsize)
    data = _payload(case, length, rng)
    (tmp_path / "payload").write_bytes(data)
    subprocess.run(["dd", f"if={tmp_path / 'payload'}", f"of={mount.data}", "bs=5",
                    f"seek={offset}", "oflag=seek_bytes", "conv=notrunc", "status=none"],
                   check=True, capture_output=True)
    image.put(offset, data)
    _mount_shows(mount, image, "dd")
    _store_holds(path, image, "dd")

    # 3. A shared mapping: msync (mmap.flush) stores the data before the file is closed.
    offset, length = _range(rng, size, itemsize)
    data = _payload(case, length, rng)
    with open(mount.data, "r+b") as f, mmap.mmap(f.fileno(), 0) as mapped:
        mapped[offset : offset + length] = data
        mapped.flush()
        image.put(offset, data)
        _store_holds(path, image, "a write through a shared mapping and msync")
    _mount_shows(mount, image, "a write through a shared mapping")

    # 4. A whole chunk file (the last one: an edge chunk in most cases). Its overhang is
    # written too, and reads back as the fill value.
    chunks = case.grid(case.chunk_shape)
    index = chunks[-1]
    key = chunk_key(case.doc, index)
    chunk_bytes = math.prod(case.chunk_shape) * itemsize
    data = _payload(case, chunk_bytes, rng)
    _pwrite(mount.chunk(key), data, 0)
    image.put_chunk(index, data)
    padded = with_overhang(case, image.array(), case.fill)
    assert_same_bytes(mount.chunk(key).read_bytes(), bits(padded[chunk_slices(case, index)])
                       .tobytes(), f"chunks/{key} after writing it")
    _mount_shows(mount, image, f"writing chunks/{key}")
    _store_holds(path, image, f"writing chunks/{key}")

    # 5. A stored chunk overwritten with the fill value is deleted from the store.
    key = next(k for k in (chunk_key(case.doc, i) for i in chunks) if k in stored_keys(str(path)))
    index = next(i for i in chunks if chunk_key(case.doc, i) == key)
    fill_chunk = bits(case.fill).tobytes() * math.prod(case.chunk_shape)
    _pwrite(mount.chunk(key), fill_chunk, 0)
    image.put_chunk(index, fill_chunk)
    assert key not in stored_keys(str(path)), f"{key} is all fill value but still stored"
    _mount_shows(mount, image, f"filling chunks/{key}")

    status = mount.unmount()
    assert status == 0, mount.log()
    assert_clean_log(mount)

    final = image.array()
    _store_holds(path, image, "unmounting")
    assert key not in stored_keys(str(path)), f"{key} is all fill value but stored by unmounting"
    assert stored_keys(str(path)) == expected_keys(case, final)
    _check_shards(case, path, final)
    if case.zarr_python:
        seen, fill = read_zarr_python(str(path))
        assert_same_bits(seen, final, "zarr-python reading the array after unmounting")
        assert_same_bits(fill, case.fill, "zarr-python's fill value")


def test_write_subset_covers_the_brief() -> None:
    """Guard against the write subset silently shrinking."""
    data_types = {c.data_type for c in WRITE_CASES}
    assert data_types == set(STORAGE)
    ids = " ".join(WRITE_CASE_IDS)
    for needle in ("index-start", "index-end", "nested", "transpose-3d-big-endian", "key-v2",
                   "nan", "edge-only", "chunk-larger-than-array"):
        assert needle in ids
