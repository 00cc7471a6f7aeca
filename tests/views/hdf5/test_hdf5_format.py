"""The HDF5 structures of `data.h5`, without FUSE or a store: the checksum against lookup3's
own test values, files of one dataset indexed by B-trees of one, two and three levels, and
one of strings in global heap collections, written to disk as bytes and read by h5py (its
HDF5 verifies every checksum and layout rule)."""

from __future__ import annotations

import zlib
from pathlib import Path

import h5py
import numpy as np
import pytest

from zarrfs.formats import v3
from zarrfs.grid import Box
from zarrfs.views.hdf5 import structures as h5
from zarrfs.views.hdf5.strings import StringSource, strings_h5_file
from zarrfs.views.hdf5.vlen import collections

pytestmark = pytest.mark.fast


@pytest.mark.parametrize(("text", "expected"), [
    (b"", 0xDEADBEEF),
    (b"Four score and seven years ago", 0x17770551),
])
def test_checksum_is_lookup3(text: bytes, expected: int) -> None:
    assert h5.checksum(text) == expected


def _file(values: np.ndarray, chunk: tuple[int, int], missing: set[int]) -> bytes:
    """A file of one deflated dataset `data`: its B-tree, a chunk of fill values (5), then its
    chunks in chunk order, those in `missing` left out and pointing at the fill chunk."""
    grid = tuple(-(-n // c) for n, c in zip(values.shape, chunk, strict=True))
    padded = np.full(tuple(g * c for g, c in zip(grid, chunk, strict=True)), 0, values.dtype)
    padded[: values.shape[0], : values.shape[1]] = values
    rows, columns = chunk
    blocks = [zlib.compress(padded[i * rows:(i + 1) * rows, j * columns:(j + 1) * columns].tobytes())
              for i in range(grid[0]) for j in range(grid[1])]
    fill = zlib.compress(np.full(chunk, 5, values.dtype).tobytes())
    dataset_messages = [
        h5.message(h5.DATASPACE, h5.dataspace(values.shape)),
        h5.message(h5.DATATYPE, h5.datatype(values.dtype) or b""),
        h5.message(h5.FILL_VALUE, h5.fill_value(np.array(5, values.dtype).tobytes())),
        h5.message(h5.FILTERS, h5.filter_pipeline([(h5.DEFLATE, [1])])),
    ]
    root_at = h5.FILE_HEAD_SIZE
    dataset_at = root_at + len(h5.object_header(h5.group_messages([("data", 0)])))

    def dataset(index_at: int) -> bytes:
        layout = h5.chunked_layout(chunk, values.dtype.itemsize, index_at)
        return h5.object_header([*dataset_messages, h5.message(h5.LAYOUT, layout)])

    tree = h5.ChunkBTree(dataset_at + len(dataset(0)), grid, chunk, values.dtype.itemsize)
    head = [h5.object_header(h5.group_messages([("data", dataset_at)])), dataset(tree.at)]
    at, sizes, addresses = tree.end + len(fill), [], []
    for number, block in enumerate(blocks):
        sizes.append(len(fill) if number in missing else len(block))
        addresses.append(tree.end if number in missing else at)
        at += 0 if number in missing else len(block)
    nodes = []
    for level in reversed(range(len(tree.counts))):
        for number in range(tree.counts[level]):
            span = tree.span(level, number)
            nodes.append(tree.internal(level, number) if level else
                         tree.leaf(number, sizes[span.start:span.stop], addresses[span.start:span.stop]))
    body = b"".join([*head, *nodes, fill, *(b for n, b in enumerate(blocks) if n not in missing)])
    return h5.file_head(h5.FILE_HEAD_SIZE + len(body)) + body


@pytest.mark.parametrize(("shape", "chunk"), [((30, 50), (8, 16)), ((100, 2100), (2, 100)),
                                              ((70, 70), (1, 1))],
                         ids=["a-leaf", "two-levels", "three-levels"])
def test_h5py_reads_the_bytes(tmp_path: Path, shape: tuple[int, int], chunk: tuple[int, int]) -> None:
    values = np.random.default_rng(1).integers(0, 1000, shape).astype(">i4")
    grid = tuple(-(-n // c) for n, c in zip(shape, chunk, strict=True))
    missing = {1, 3, grid[0] * grid[1] - 1}
    path = tmp_path / "a.h5"
    path.write_bytes(_file(values, chunk, missing))
    expected = values.copy()
    for number in missing:
        row, column = divmod(number, grid[1])
        expected[row * chunk[0]:(row + 1) * chunk[0], column * chunk[1]:(column + 1) * chunk[1]] = 5
    with h5py.File(path, "r") as f:
        assert f["data"].dtype == np.dtype(">i4") and f["data"].chunks == chunk
        assert np.array_equal(f["data"][...], expected)
        assert f["data"].id.get_num_chunks() == grid[0] * grid[1]
        assert np.array_equal(f["data"][shape[0] - 1, -7:], expected[shape[0] - 1, -7:])


class _Strings(StringSource):
    """An array of strings of no fixed size in memory, as a dataset reads one."""

    def __init__(self, values: np.ndarray, chunk: int) -> None:
        metadata = v3.metadata_from_json({
            "zarr_format": 3, "node_type": "array", "shape": list(values.shape), "data_type": "uint8",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [chunk]}},
            "chunk_key_encoding": {"name": "default"}, "fill_value": 0, "codecs": [{"name": "bytes"}],
            "attributes": {"long_name": "words"}})
        super().__init__(values, metadata, (chunk,))

    def read(self, box: Box) -> np.ndarray:
        return np.asarray(self.array[box.start[0]:box.stop[0]])

    def fill(self) -> str:
        return ""


def test_strings_in_global_heap_collections(tmp_path: Path) -> None:
    """A dataset of variable-length strings whose heaps follow the chunks: 70,000 strings of a
    chunk need two collections (about 1 MiB each at most; 65,535 objects, as many empty
    strings), a string of 2 MB one of its own, an empty one is an object of no bytes; h5py
    reads every string."""
    values = np.array([f"s{n}é" for n in range(70_010)], dtype="<U8").astype(object)
    values[3], values[70_005] = "", "x" * 2_000_000
    _, elements = collections([str(v).encode() for v in values[:70_000]])
    assert len(set(elements["address"].tolist())) == 2 and elements["object"].max() < 65_535
    _, empty = collections([b""] * 70_000)
    assert len(set(empty["address"].tolist())) == 2 and empty["object"].max() == 65_535
    made = strings_h5_file(_Strings(values, 70_000))
    (tmp_path / "s.h5").write_bytes(made.read(0, made.size))
    with h5py.File(tmp_path / "s.h5", "r") as f:
        assert f["data"].attrs["long_name"] == b"words"
        assert np.array_equal(np.asarray(f["data"].asstr()[...], dtype=object), values)
