"""The Zarr v2 interop matrix, writes (rw mounts): elements and an unaligned run of bytes
through `data`, a whole chunk file, a chunk set to the fill value through a memory map; then
the writers (zarr-python 3, TensorStore) read the new values exactly, the all-fill chunk is
gone from the store and the metadata files are unchanged."""

from __future__ import annotations

import json
import os
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers.v2_cases import NC, SPECS, Spec, random_values
from tests.helpers.v2_oracles import (
    assert_same_bytes,
    decode_fill,
    expected_chunk,
    flat,
    read_tensorstore,
    read_zarr_python,
    stored_metadata,
    tensorstore_can_read,
    write_tensorstore,
    write_zarr_python,
    zarray_for,
)

# -- writes --------------------------------------------------------------------------------------

WRITE_CASES = [
    ("i2-be-zstd", "zarr-python", "<"),
    ("i4-be-rank3-blosc-F-slash", "zarr-python", "<"),
    ("u8-be-lz4-max-fill", "zarr-python", "<"),
    ("u1-lzma", "zarr-python", "<"),
    ("f8-le-null-zlib", "zarr-python", "<"),
    ("c16-be-bz2-F", "zarr-python", ">"),
    ("S6-short-base64", "zarr-python", "<"),
    ("U3-be-default-fill-F", "zarr-python", "<"),
    ("struct-base64-zlib", "zarr-python", "<"),
    ("filter-delta-zlib", "zarr-python", "<"),
    ("filter-packbits", "zarr-python", "<"),
    ("filter-astype-gzip", "zarr-python", "<"),
    ("filter-fixedscaleoffset", "zarr-python", "<"),
    ("f8-be-nan-blosc-slash", "tensorstore", "<"),
    ("struct-null-F", "tensorstore", ">"),
    ("ts-defaults-i1-F-slash", "tensorstore", "<"),
]
LOSSY = (NC.FixedScaleOffset, NC.Quantize, NC.BitRound)


def kept(spec: Spec, values: np.ndarray) -> np.ndarray:
    """What the array keeps of written values: lossy filters round them (element by element, and
    rounding again changes nothing)."""
    for codec in spec.filters:
        if isinstance(codec, LOSSY):
            decoded = codec.decode(codec.encode(np.ascontiguousarray(values)))
            values = np.asarray(decoded, dtype=values.dtype).reshape(values.shape)
    return values


def _check_store(spec: Spec, store: Path, expected: np.ndarray, when: str) -> None:
    seen = read_zarr_python(store)
    assert_same_bytes(flat(seen), flat(expected), spec.np_dtype, spec.shape, f"zarr-python {when}")
    if spec.tensorstore and tensorstore_can_read(spec.np_dtype):
        seen = read_tensorstore(store, spec.np_dtype)
        assert_same_bytes(flat(seen), flat(expected), spec.np_dtype, spec.shape, f"TensorStore {when}")


@pytest.mark.parametrize(("case", "writer", "endian"), WRITE_CASES,
                         ids=[f"{c}-{w}{'-endian-big' if e == '>' else ''}" for c, w, e in WRITE_CASES])
def test_write(case: str, writer: str, endian: str, scratch: Path, mount_array: Any) -> None:
    spec = SPECS[case]
    store = scratch / "array"
    if writer == "tensorstore":
        write_tensorstore(spec, str(store), zarray_for(spec))
    else:
        write_zarr_python(spec, str(store))
    before = stored_metadata(store)
    expected = np.array(read_zarr_python(store), order="C")  # a copy, reshape(-1) is a view
    fill = decode_fill(json.loads(before[".zarray"])["fill_value"], spec.np_dtype)
    grid = spec.grid()
    assert len(grid) >= 3, "a write case needs a missing, a filled and a rewritten chunk"
    missing, to_fill, rewritten = grid[0], grid[len(grid) // 2], grid[-1]
    assert (store / spec.key(to_fill)).exists(), "the chunk to fill must be stored at first"
    assert not (store / spec.key(missing)).exists(), "the first chunk must be missing at first"
    flat_dtype = spec.np_dtype.newbyteorder(endian)
    rng = np.random.default_rng(zlib.crc32(f"write-{case}".encode()))
    options = ["rw"] if endian == "<" else ["rw", "endian=big"]
    mount = mount_array(store, options=options)

    # Some elements through data with pwrite (one in the missing chunk), then fsync.
    new = random_values(spec.np_dtype, (5,), rng, spec.values)
    points = [0, *rng.choice(expected.size, 4, replace=False).tolist()]
    fd = os.open(mount.data, os.O_WRONLY)
    try:
        for i, point in enumerate(points):
            element = flat(new[i : i + 1], endian)
            assert os.pwrite(fd, element, point * spec.np_dtype.itemsize) == len(element)
            expected.reshape(-1)[point] = kept(spec, new[i : i + 1])[0]
        if not any(isinstance(codec, LOSSY) for codec in spec.filters):
            # A run of bytes across chunks, starting and ending inside elements: what is not
            # written of an element keeps its bytes.
            size = spec.np_dtype.itemsize
            start, stop = size * spec.chunks[-1] - size // 2, size * (expected.size - 1) - 1
            raw = bytearray(flat(expected, endian))
            raw[start:stop] = flat(random_values(spec.np_dtype, spec.shape, rng, spec.values),
                                   endian)[start:stop]
            assert os.pwrite(fd, bytes(raw[start:stop]), start) == stop - start
            expected = np.frombuffer(bytes(raw), dtype=flat_dtype).reshape(spec.shape).copy()
        os.fsync(fd)
    finally:
        os.close(fd)
    _check_store(spec, store, expected, "after fsync() of data")

    # One whole (edge) chunk file, then close.
    chunk = random_values(spec.np_dtype, spec.chunks, rng, spec.values)
    key = spec.key(rewritten)
    with open(mount.path / "chunks" / key, "r+b") as f:  # fixed size: no O_TRUNC
        f.write(flat(chunk, endian))
    region = spec.region(rewritten)
    inside = tuple(slice(0, r.stop - r.start) for r in region)
    expected[region] = kept(spec, chunk)[inside]
    if not any(isinstance(codec, LOSSY) for codec in spec.filters):
        # Read back: the overhang past the array's edge reads as the fill value.
        assert_same_bytes((mount.path / "chunks" / key).read_bytes(),
                          flat(expected_chunk(spec, expected, fill, rewritten), endian), flat_dtype,
                          spec.chunks, f"chunk file {key} read back")
    _check_store(spec, store, expected, f"after close() of chunk file {key}")

    # One stored chunk set to the fill value through a memory map of data.
    region = spec.region(to_fill)
    view = np.memmap(mount.data, dtype=flat_dtype, mode="r+", shape=spec.shape)
    view[region] = fill
    view.flush()
    del view
    expected[region] = fill

    status = mount.unmount()
    assert status == 0, f"zarrfs exited with {status}:\n{mount.log()}"
    assert stored_metadata(store) == before, "metadata files changed"
    assert not (store / spec.key(to_fill)).exists(), "a chunk all fill value is still stored"
    if flat(expected[spec.region(rewritten)]) != flat(np.full(chunk[inside].shape, fill)):
        assert (store / key).exists(), f"the rewritten chunk {key} is not stored"
    _check_store(spec, store, expected, "after unmount")


def test_write_rank0(scratch: Path, mount_array: Any) -> None:
    spec = SPECS["rank0-zstd"]  # <f8, fill 1.5
    store = scratch / "array"
    write_zarr_python(spec, str(store))
    before = stored_metadata(store)
    assert (store / "0").exists()
    mount = mount_array(store, options=("rw",))
    fd = os.open(mount.data, os.O_WRONLY)
    try:
        assert os.pwrite(fd, flat(np.array(-0.25)), 0) == 8
        os.fsync(fd)
        _check_store(spec, store, np.array(-0.25), "after fsync() of data")
        assert os.pwrite(fd, flat(np.array(1.5)), 0) == 8  # the fill value
    finally:
        os.close(fd)
    assert mount.unmount() == 0, mount.log()
    assert stored_metadata(store) == before, "metadata files changed"
    assert not (store / "0").exists(), "a chunk all fill value is still stored"
    _check_store(spec, store, np.array(1.5), "after unmount")
