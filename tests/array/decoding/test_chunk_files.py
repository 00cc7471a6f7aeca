"""Decoding processes reading a local store's chunk files themselves (zarrfs.array.decoding.
files): every kind of chunk lands in the slab as a read through the cache gives it (decoded,
stored as its elements are, byte-swapped, at an edge, missing); what the store's own open
would decide (a link, a FIFO) is left to the daemon; a chunk not a chunk's bytes fails the job.
Then through real mounts: streams of such arrays read zarr-python's values, links inside the
store are followed by the daemon, a link leading outside is refused (EIO), and a missing chunk
fails reads when `fill_missing_data_reads=false`."""

from __future__ import annotations

import errno
import json
import mmap
import os
import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
import zarr
from zarr.codecs import BytesCodec, ZstdCodec

from tests.helpers.mounting import MountFactory
from zarrfs.array.decoding import MISSING, READ, REFERRED, ChunkFileReader, FilesJob
from zarrfs.array_metadata import open_array
from zarrfs.codecs import received, sent
from zarrfs.store import Store

pytestmark = pytest.mark.fast

SHAPE = (200, 300)  # (edge chunks on both axes)
CHUNKS = (64, 128)


def values(dtype: str = "<u2") -> np.ndarray[Any, Any]:
    return (np.arange(np.prod(SHAPE), dtype=np.int64).reshape(SHAPE) * 7 % 60000).astype(dtype)


def make(path: Path, kind: str) -> np.ndarray[Any, Any]:
    """An array of `kind` (zstd; raw: uncompressed; big: uncompressed v2 `>u2`) at `path`."""
    data = values(">u2" if kind == "big" else "<u2")
    if kind == "big":
        zarr.create_array(path, shape=SHAPE, chunks=CHUNKS, dtype=">u2", fill_value=0, zarr_format=2,
                          compressors=None)[...] = data
    else:
        compressor = ZstdCodec(level=1) if kind == "zstd" else None
        zarr.create_array(path, shape=SHAPE, chunks=CHUNKS, dtype="<u2", fill_value=0,
                          serializer=BytesCodec(), compressors=compressor)[...] = data
    return data


def chunk_path(store: Path, cell: tuple[int, int], kind: str) -> Path:
    return store / (f"{cell[0]}.{cell[1]}" if kind == "big" else f"c/{cell[0]}/{cell[1]}")


def read_rows(store: Path, first: int, stop: int, dtype: str = "<u2") -> tuple[np.ndarray[Any, Any], Any]:
    """Rows [first, stop) read by a process's reader from the store's files, as a slab of `dtype`
    holds them; and what became of each chunk (cells, FilesRead)."""
    array = open_array(Store.open(str(store)))
    try:
        files = array.source.chunk_files()
        assert files is not None
        shape = (stop - first, SHAPE[1])
        cells = [(row, column) for row in range(first // CHUNKS[0], -(-stop // CHUNKS[0]))
                 for column in range(-(-SHAPE[1] // CHUNKS[1]))]
        slab = mmap.mmap(-1, int(np.prod(shape)) * 2)
        local = Store.open(str(store)).local_files
        assert local is not None
        directory = local.lend_directory()
        assert directory is not None
        try:
            job = FilesJob(1, shape, sent(np.dtype(dtype)), (first, 0), cells, b"\x00\x00")
            found = ChunkFileReader().read(files, directory, job, slab)
        finally:
            os.close(directory)
        out = np.frombuffer(slab, dtype=dtype).reshape(shape).copy()
        return out, (cells, found)
    finally:
        array.close()


@pytest.mark.parametrize("kind", ["zstd", "raw", "big"])
@pytest.mark.parametrize("dtype", ["<u2", ">u2"])
def test_a_process_reads_chunks_as_a_read_through_the_cache_does(tmp_path: Path, kind: str,
                                                                 dtype: str) -> None:
    store = tmp_path / "a.zarr"
    data = make(store, kind)
    (store / "c" / "1" / "2").unlink() if kind != "big" else (store / "1.2").unlink()
    expected = data.astype(dtype)
    expected[64:128, 256:] = 0  # (chunk (1, 2) is missing: the fill value)
    out, (cells, found) = read_rows(store, 40, 150, dtype)  # (rows of three rows of chunks)
    assert np.array_equal(out, expected[40:150])
    states = dict(zip(cells, found.states, strict=True))
    assert states.pop((1, 2)) == MISSING and set(states.values()) == {READ}
    stored = Store.open(str(store))
    for cell, generation in zip(cells, found.generations, strict=True):
        key = chunk_path(store, cell, kind).relative_to(store).as_posix()
        assert generation == stored.generation(key), key  # (what a recheck compares)
    sizes = [chunk_path(store, cell, kind).stat().st_size for cell in cells if cell != (1, 2)]
    assert found.nbytes == sum(sizes)


def test_what_the_stores_own_open_decides_is_left_to_the_daemon(tmp_path: Path) -> None:
    """A link (inside the store or not) and a FIFO: never followed, never waited on."""
    store = tmp_path / "a.zarr"
    make(store, "zstd")
    (store / "c" / "0" / "0").unlink()
    (store / "c" / "0" / "0").symlink_to(store / "c" / "0" / "1")
    (store / "c" / "0" / "2").unlink()
    os.mkfifo(store / "c" / "0" / "2")
    _, (cells, found) = read_rows(store, 0, 64)
    assert dict(zip(cells, found.states, strict=True)) == {(0, 0): REFERRED, (0, 1): READ, (0, 2): REFERRED}
    assert found.generations[0] is None and found.generations[2] is None


def test_types_of_other_packages_keep_their_byte_order_in_a_process(tmp_path: Path) -> None:
    """Pickled whole, ml_dtypes' big-endian bfloat16 may arrive in the machine's byte order (it
    did in the decoding processes: tests/interop/test_mount_matrix_reads.py's big-endian bfloat16 read
    unswapped): the codecs and the slab's type a process is sent keep theirs."""
    big = np.dtype(ml_dtypes.bfloat16).newbyteorder(">")
    assert received(pickle.loads(pickle.dumps(sent(big)))) == big
    store = tmp_path / "b.zarr"
    doc = {"zarr_format": 3, "node_type": "array", "shape": [4, 6], "data_type": "bfloat16",
           "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4, 6]}},
           "chunk_key_encoding": {"name": "default"}, "fill_value": 0.0,
           "codecs": [{"name": "bytes", "configuration": {"endian": "big"}}]}
    store.mkdir()
    (store / "zarr.json").write_text(json.dumps(doc))
    (store / "c" / "0").mkdir(parents=True)
    expected = (np.arange(24).reshape(4, 6) / 4).astype(big)
    (store / "c" / "0" / "0").write_bytes(expected.tobytes())
    array = open_array(Store.open(str(store)))
    try:
        decode = pickle.loads(pickle.dumps(array.io.decoder))
        assert np.array_equal(decode(expected.tobytes()).astype(np.float32), expected.astype(np.float32))
    finally:
        array.close()


def read_shard(store: Path, shard: tuple[int, int], *,
               rewrite: bool = False) -> tuple[np.ndarray[Any, Any], Any]:
    """The inner chunks of one shard (of a sharded copy of `values()`: 64 x 128 inner chunks
    in 128 x 256 shards) read by a process's reader into the shard's rows of a slab, as the
    daemon's index says (`rewrite`: the shard rewritten after its index was read)."""
    array = open_array(Store.open(str(store)))
    try:
        files = array.source.chunk_files()
        assert files is not None and files.chunk_shape == CHUNKS
        rows = (shard[0] * 128, min(SHAPE[0], shard[0] * 128 + 128))
        cells = [(row, column) for row in range(rows[0] // 64, -(-rows[1] // 64))
                 for column in range(shard[1] * 2, min(3, shard[1] * 2 + 2))]
        part = array.source.shard_part(array.geometry(), cells)
        assert part is not None
        if rewrite:
            path = store / "c" / str(shard[0]) / str(shard[1])
            path.write_bytes(path.read_bytes())  # (the same bytes, another generation)
        shape = (rows[1] - rows[0], SHAPE[1])
        slab = mmap.mmap(-1, int(np.prod(shape)) * 2)
        local = Store.open(str(store)).local_files
        assert local is not None
        directory = local.lend_directory()
        assert directory is not None
        try:
            job = FilesJob(1, shape, sent(np.dtype("<u2")), (rows[0], 0), cells, b"\x00\x00", part)
            found = ChunkFileReader().read(files, directory, job, slab)
        finally:
            os.close(directory)
        return np.frombuffer(slab, dtype="<u2").reshape(shape).copy(), (cells, found, part)
    finally:
        array.close()


def test_a_process_reads_inner_chunks_of_a_shard_where_its_index_says(tmp_path: Path) -> None:
    store = tmp_path / "s.zarr"
    data = values()
    array = zarr.create_array(store, shape=SHAPE, chunks=CHUNKS, shards=(128, 256), dtype="<u2", fill_value=0,
                              compressors=ZstdCodec(level=1))
    array[...] = data
    array[64:128, 128:256] = 0  # (an inner chunk of fill values: not stored, its span empty)
    expected = data.copy()
    expected[64:128, 128:256] = 0
    out, (cells, found, part) = read_shard(store, (0, 0))
    assert np.array_equal(out[:, :256], expected[:128, :256])
    states = dict(zip(cells, found.states, strict=True))
    assert states == {(0, 0): READ, (0, 1): READ, (1, 0): READ, (1, 1): MISSING}
    assert set(found.generations) == {part.generation} == {Store.open(str(store)).generation("c/0/0")}
    out, (cells, found, _) = read_shard(store, (1, 1))  # (an edge shard: rows 128-199, columns 256-299)
    assert np.array_equal(out[:, 256:], expected[128:, 256:])
    _, (cells, found, _) = read_shard(store, (0, 0), rewrite=True)
    assert set(found.states) == {REFERRED}, "a shard rewritten since its index was read was read"


def test_a_file_that_is_not_a_chunk_fails_the_job(tmp_path: Path) -> None:
    store = tmp_path / "a.zarr"
    make(store, "raw")
    (store / "c" / "0" / "1").write_bytes(b"short")
    with pytest.raises(ValueError):
        read_rows(store, 0, 64)


# -- through real mounts ----------------------------------------------------------------------

BIG = (1024, 4096)


@pytest.fixture
def picture(tmp_path: Path) -> Iterator[tuple[Path, np.ndarray[Any, Any]]]:
    """An 8 MiB uint16 image in 128 x 512 chunks (slabs, streamed), uncompressed."""
    data = (np.arange(np.prod(BIG), dtype=np.int64).reshape(BIG) % 65521).astype("<u2")
    store = tmp_path / "p.zarr"
    zarr.create_array(store, shape=BIG, chunks=(128, 512), dtype="<u2", fill_value=0, serializer=BytesCodec(),
                      compressors=None)[...] = data
    yield store, data


def read_data(path: Path) -> bytes:
    with open(path, "rb", buffering=0) as f:
        return b"".join(iter(lambda: f.read(1 << 20), b""))


def test_links_inside_the_store_read_as_zarr_python_reads_them(picture: tuple[Path, np.ndarray[Any, Any]],
                                                               mount_array: MountFactory) -> None:
    store, _ = picture
    (store / "c" / "3" / "2").unlink()
    (store / "c" / "3" / "2").symlink_to("../5/7")
    mount = mount_array(store, ["ro"])
    expected = np.asarray(zarr.open_array(str(store))[...])
    assert read_data(mount.data) == expected.tobytes()


def test_a_link_leading_outside_fails_the_read(picture: tuple[Path, np.ndarray[Any, Any]],
                                               mount_array: MountFactory, tmp_path: Path) -> None:
    store, _ = picture
    outside = tmp_path / "outside"
    outside.write_bytes(bytes(range(256)) * 512)  # (a chunk's worth of bytes, not the store's)
    (store / "c" / "3" / "2").unlink()
    (store / "c" / "3" / "2").symlink_to(outside)
    mount = mount_array(store, ["ro"])
    with pytest.raises(OSError) as raised:
        read_data(mount.data)
    assert raised.value.errno == errno.EIO
    assert "'c/3/2'" in mount.log()


def test_a_sharded_array_reads_as_zarr_python_reads_it(tmp_path: Path, mount_array: MountFactory) -> None:
    data = (np.arange(np.prod(BIG), dtype=np.int64).reshape(BIG) % 65521).astype("<u2")
    store = tmp_path / "s.zarr"
    array = zarr.create_array(store, shape=BIG, chunks=(128, 512), shards=(256, 2048), dtype="<u2",
                              fill_value=0, compressors=ZstdCodec(level=1))
    array[...] = data
    array[256:384, 1024:1536] = 0  # (an inner chunk not stored)
    (store / "c" / "3" / "1").unlink()  # (a whole shard not stored)
    mount = mount_array(store, ["ro"])
    assert read_data(mount.data) == np.asarray(zarr.open_array(str(store))[...]).tobytes()


def test_a_missing_chunk_fails_the_read_without_fill_missing_data_reads(
        picture: tuple[Path, np.ndarray[Any, Any]], mount_array: MountFactory) -> None:
    store, data = picture
    (store / "c" / "6" / "1").unlink()
    filled = mount_array(store, ["ro"])
    expected = data.copy()
    expected[768:896, 512:1024] = 0
    assert read_data(filled.data) == expected.tobytes()
    refused = mount_array(store, ["ro", "fill_missing_data_reads=false"])
    with pytest.raises(OSError) as raised:
        read_data(refused.data)
    assert raised.value.errno == errno.EIO
