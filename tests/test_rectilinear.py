"""Rectilinear chunk grids (zarr-extensions `rectilinear`, kind `inline`) through real mounts.

The arrays are written by hand, as the registry defines them: a v3 document with the edges
(a repeated integer, explicit lists, `[edge, count]` runs, edges past the end), every chunk
the full size of its edges, encoded with numcodecs' Zstd. The oracle decodes the stored
chunks with numcodecs and puts them together with numpy (`assemble`), independent of zarrfs.
"""

from __future__ import annotations

import errno
import itertools
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np
import pytest

from tests.helpers.mounting import ZARRFS
from zarrfs.grid import Box, cells_of, cells_touched
from zarrfs.rectilinear import RectilinearGrid, parse_rectilinear

FILL = 7
DTYPE = np.dtype("<u2")
# The registry's example: shape [6]*5, every way of writing edges.
EXAMPLE = [4, [1, 2, 3], [[4, 2]], [[1, 3], 3], [4, 4, 4]]


def expand(axis: Any, extent: int) -> list[int]:
    """The registry's rule, written out again for the oracle."""
    if isinstance(axis, int):
        return [axis] * max(1, -(-extent // axis))
    out: list[int] = []
    for item in axis:
        out += [item[0]] * item[1] if isinstance(item, list) else [item]
    return out


def starts(edges: list[int]) -> list[int]:
    return [0, *itertools.accumulate(edges)]


def chunk_count(edges: list[int], extent: int) -> int:
    return sum(1 for s in starts(edges)[:-1] if s < extent)


ZSTD = [{"name": "bytes", "configuration": {"endian": "little"}},
        {"name": "zstd", "configuration": {"level": 1}}]


def sharding(inner: tuple[int, ...]) -> list[dict[str, Any]]:
    return [{"name": "sharding_indexed", "configuration": {
        "chunk_shape": list(inner), "codecs": ZSTD, "index_location": "end",
        "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}]}}]


def encode(chunk: np.ndarray, inner: tuple[int, ...] | None) -> bytes:
    """A chunk as stored: zstd, or a shard of zstd inner chunks (C order) with its index."""
    if inner is None:
        return bytes(numcodecs.Zstd(level=1).encode(chunk.tobytes()))
    per = [n // c for n, c in zip(chunk.shape, inner, strict=True)]
    index = np.zeros((*per, 2), dtype="<u8")
    parts = []
    position = 0
    for i in itertools.product(*(range(p) for p in per)):
        part = encode(chunk[tuple(slice(a * c, (a + 1) * c) for a, c in zip(i, inner, strict=True))], None)
        index[i] = (position, len(part))
        parts.append(part)
        position += len(part)
    return b"".join(parts) + bytes(numcodecs.CRC32C().encode(index.tobytes()))


def decode(raw: bytes, shape: list[int], inner: tuple[int, ...] | None, fill: int = FILL) -> np.ndarray:
    if inner is None:
        return np.frombuffer(numcodecs.Zstd().decode(raw), dtype=DTYPE).reshape(shape)
    per = [n // c for n, c in zip(shape, inner, strict=True)]
    size = 16 * int(np.prod(per))
    index = np.frombuffer(numcodecs.CRC32C().decode(raw[-size - 4 :]), dtype="<u8").reshape(*per, 2)
    out = np.full(shape, fill, dtype=DTYPE)
    for i in itertools.product(*(range(p) for p in per)):
        offset, nbytes = (int(v) for v in index[i])
        if offset != 2**64 - 1:
            where = tuple(slice(a * c, (a + 1) * c) for a, c in zip(i, inner, strict=True))
            out[where] = decode(raw[offset : offset + nbytes], list(inner), None)
    return out


def write_array(path: Path, shape: tuple[int, ...], chunk_shapes: list[Any], values: np.ndarray,
                skip: set[tuple[int, ...]] = frozenset(),  # type: ignore[assignment]
                inner: tuple[int, ...] | None = None) -> None:
    """A v3 array on a rectilinear grid holding `values`, the chunks in `skip` not stored;
    sharded into `inner` chunks when given."""
    path.mkdir(parents=True)
    doc = {"zarr_format": 3, "node_type": "array", "shape": list(shape), "data_type": "uint16",
           "chunk_grid": {"name": "rectilinear",
                          "configuration": {"kind": "inline", "chunk_shapes": chunk_shapes}},
           "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
           "fill_value": FILL, "codecs": ZSTD if inner is None else sharding(inner),
           "attributes": {}}
    (path / "zarr.json").write_text(json.dumps(doc))
    edges = [expand(a, n) for a, n in zip(chunk_shapes, shape, strict=True)]
    counts = [chunk_count(e, n) for e, n in zip(edges, shape, strict=True)]
    for index in itertools.product(*(range(c) for c in counts)):
        if index in skip:
            continue
        lo = [starts(e)[i] for e, i in zip(edges, index, strict=True)]
        size = [e[i] for e, i in zip(edges, index, strict=True)]
        chunk = np.full(size, FILL, dtype=DTYPE)
        part = values[tuple(slice(a, a + s) for a, s in zip(lo, size, strict=True))]
        chunk[tuple(slice(0, n) for n in part.shape)] = part
        key = path / "c" / "/".join(map(str, index))
        key.parent.mkdir(parents=True, exist_ok=True)
        key.write_bytes(encode(chunk, inner))


def stored_chunks(path: Path) -> dict[tuple[int, ...], np.ndarray]:
    """Every stored chunk, decoded by numcodecs to the shape of its edges."""
    doc = json.loads((path / "zarr.json").read_text())
    codec = doc["codecs"][0]
    inner = tuple(codec["configuration"]["chunk_shape"]) if codec["name"] == "sharding_indexed" else None
    shape = doc["shape"]
    edges = [expand(a, n) for a, n in zip(doc["chunk_grid"]["configuration"]["chunk_shapes"], shape,
                                          strict=True)]
    found = {}
    for file in (path / "c").rglob("*"):
        if file.is_file():
            index = tuple(int(p) for p in file.relative_to(path / "c").parts)
            size = [e[i] for e, i in zip(edges, index, strict=True)]
            found[index] = decode(file.read_bytes(), size, inner, doc["fill_value"])
    return found


def assemble(path: Path) -> np.ndarray:
    """The array as its stored chunks say (the oracle)."""
    doc = json.loads((path / "zarr.json").read_text())
    shape = doc["shape"]
    edges = [expand(a, n) for a, n in zip(doc["chunk_grid"]["configuration"]["chunk_shapes"], shape,
                                          strict=True)]
    out = np.full([starts(e)[-1] for e in edges], doc["fill_value"], dtype=DTYPE)
    for index, chunk in stored_chunks(path).items():
        lo = [starts(e)[i] for e, i in zip(edges, index, strict=True)]
        out[tuple(slice(a, a + n) for a, n in zip(lo, chunk.shape, strict=True))] = chunk
    return out[tuple(slice(0, n) for n in shape)]


def values_of(shape: tuple[int, ...]) -> np.ndarray:
    return (np.arange(int(np.prod(shape))) * 13 % 60000 + 100).astype(DTYPE).reshape(shape)


# -- index math ----------------------------------------------------------------------------------


@pytest.mark.fast
def test_the_registry_example_expands_as_it_says() -> None:
    grid = parse_rectilinear({"kind": "inline", "chunk_shapes": EXAMPLE}, (6,) * 5, "chunk_grid")
    assert grid.axes == (4, (1, 2, 3), (4, 4), (1, 1, 1, 3), (4, 4, 4))
    assert grid.grid_shape((6,) * 5) == (2, 3, 2, 4, 2)  # the third [4, 4, 4] chunk is past the end
    assert grid.largest == (4, 3, 4, 3, 4)
    assert grid.to_json()["configuration"]["chunk_shapes"] == [4, [1, 2, 3], [[4, 2]], [[1, 3], 3], [[4, 3]]]
    two_d = RectilinearGrid(((16, 10), (24, 14)))  # the registry's diagram: (20, 15) is in chunk (1, 0)
    (piece,) = two_d.cells_of(Box((20, 15), (21, 16)))
    assert piece.cell == (1, 0) and piece.in_cell == (slice(4, 5), slice(15, 16))


@pytest.mark.fast
def test_cells_of_covers_every_element_once() -> None:
    grid = RectilinearGrid(((1, 2, 3, 5), 3))
    box = Box((1, 2), (10, 8))
    seen = np.zeros(box.shape, dtype=int)
    for piece in grid.cells_of(box):
        chunk = grid.chunk_box(piece.cell)
        seen[piece.in_box] += 1
        for d in range(2):
            assert piece.in_cell[d].start + chunk.start[d] == piece.in_box[d].start + box.start[d]
    assert (seen == 1).all()
    regular = RectilinearGrid((4, 5))  # integer axes: the regular grid
    assert list(regular.cells_of(box)) == list(cells_of(box, (4, 5)))
    for asked in (box, Box((0, 0), (4, 5)), Box((3, 7), (3, 9))):  # (the last: empty)
        assert list(cells_touched(asked, (4, 5))) == [piece.cell for piece in cells_of(asked, (4, 5))]


@pytest.mark.fast
def test_bad_edges_are_refused_naming_the_member() -> None:
    for config, member in [({"kind": "x", "chunk_shapes": [4]}, "kind"),
                           ({"kind": "inline", "chunk_shapes": [[2, 2]]}, "chunk_shapes[0]"),
                           ({"kind": "inline", "chunk_shapes": [[[2, 0]]]}, "chunk_shapes[0][0]"),
                           ({"kind": "inline", "chunk_shapes": [0]}, "chunk_shapes[0]")]:
        with pytest.raises(ValueError, match=member.replace("[", r"\[").replace("]", r"\]")):
            parse_rectilinear(config, (6,), "chunk_grid")


# -- through a mount -------------------------------------------------------------------------------


@pytest.mark.fast
def test_registry_example_reads_and_writes(tmp_path: Path, mount_array: Any) -> None:
    shape = (6,) * 5
    path = tmp_path / "a.zarr"
    write_array(path, shape, EXAMPLE, values_of(shape), skip={(1, 2, 1, 3, 1), (0, 0, 0, 0, 0)})
    expected = assemble(path)
    assert (expected == FILL).any()
    m = mount_array(path, ["rw"])
    assert np.array_equal(np.fromfile(m.data, dtype=DTYPE).reshape(shape), expected)
    # a chunk file holds its chunk: the shape of its edges, overhang past the end as the fill
    chunk = np.fromfile(m.chunk("c/1/2/1/3/1"), dtype=DTYPE).reshape(4, 3, 4, 3, 4)
    assert (chunk == FILL).all()
    chunk = np.fromfile(m.chunk("c/1/1/0/3/1"), dtype=DTYPE).reshape(4, 2, 4, 3, 4)
    assert np.array_equal(chunk[:2, :, :, :, :2], expected[4:6, 1:3, 0:4, 3:6, 4:6])
    assert (chunk[2:] == FILL).all() and (chunk[..., 2:] == FILL).all()
    assert not (m.path / "chunks/c/0/0/0/0/2").exists()  # the [4, 4, 4] axis holds 2 chunks
    new = expected.copy()
    new[1:5, 0:5, 2:6, 1:5, 3:6] = 12345
    a = np.memmap(m.data, dtype=DTYPE, mode="r+", shape=shape)
    a[1:5, 0:5, 2:6, 1:5, 3:6] = 12345
    a.flush()
    del a
    with open(m.chunk("c/0/1/0/3/0"), "r+b") as f:
        f.write(np.full((4, 2, 4, 3, 4), 9, dtype=DTYPE).tobytes())
    new[0:4, 1:3, 0:4, 3:6, 0:4] = 9
    assert m.unmount() == 0
    assert np.array_equal(assemble(path), new)
    for index, stored in stored_chunks(path).items():  # every chunk stored at its own shape
        assert stored.shape == RectilinearGrid(parse_rectilinear(
            {"kind": "inline", "chunk_shapes": EXAMPLE}, shape, "g").axes).chunk_shape(index)


def test_resize_grows_and_shrinks_as_zarr_python_does(tmp_path: Path, mount_array: Any) -> None:
    shape = (10, 7)
    path = tmp_path / "a.zarr"
    write_array(path, shape, [[3, 3, 4], [2, 5]], values_of(shape))
    expected = assemble(path)
    row = 7 * DTYPE.itemsize
    m = mount_array(path, ["rw"])
    os.truncate(m.data, 5 * row)  # shrink: the edges stay, the chunks past row 6 go
    assert np.array_equal(np.fromfile(m.data, dtype=DTYPE).reshape(5, 7), expected[:5])
    doc = json.loads((path / "zarr.json").read_text())
    assert doc["shape"] == [5, 7]
    assert doc["chunk_grid"]["configuration"]["chunk_shapes"] == [[[3, 2], 4], [2, 5]]
    assert sorted(stored_chunks(path)) == [(i, j) for i in range(2) for j in range(2)]
    assert sorted(os.listdir(m.path / "chunks/c")) == ["0", "1"]
    os.truncate(m.data, 12 * row)  # grow past the edges: one more edge of 2
    doc = json.loads((path / "zarr.json").read_text())
    assert doc["shape"] == [12, 7]
    assert doc["chunk_grid"]["configuration"]["chunk_shapes"] == [[[3, 2], 4, 2], [2, 5]]
    grown = np.fromfile(m.data, dtype=DTYPE).reshape(12, 7)
    assert np.array_equal(grown[:5], expected[:5]) and (grown[5:] == FILL).all()
    assert sorted(os.listdir(m.path / "chunks/c")) == ["0", "1", "2", "3"]
    with open(m.data, "r+b") as f, pytest.raises(OSError) as refused:
        f.truncate(30 * row)  # an edge of 18, above the largest (4): refused, nothing changes
    assert refused.value.errno in (errno.EINVAL, errno.EFBIG, errno.EPERM)
    a = np.memmap(m.data, dtype=DTYPE, mode="r+", shape=(12, 7))
    a[10:12] = 4242
    a.flush()
    del a
    assert m.unmount() == 0
    final = assemble(path)
    assert final.shape == (12, 7) and (final[10:12] == 4242).all() and (final[5:10] == FILL).all()
    assert stored_chunks(path)[(3, 1)].shape == (2, 5)


def test_info_shows_the_edges_and_check_decodes_each_chunk_at_its_shape(tmp_path: Path) -> None:
    path = tmp_path / "a.zarr"
    write_array(path, (6,) * 5, EXAMPLE, values_of((6,) * 5))
    done = subprocess.run([ZARRFS, "info", str(path)], capture_output=True, text=True, check=True)
    assert "rectilinear 4 x [1, 2, 3] x [4*2] x [1*3, 3] x [4*3]" in done.stdout
    done = subprocess.run([ZARRFS, "check", str(path)], capture_output=True, text=True)
    assert done.returncode == 0 and "sound" in done.stdout + done.stderr
    (path / "c/1/2/1/3/1").write_bytes(encode(np.zeros((4, 3, 4, 2, 4), dtype=DTYPE), None))  # 3 -> 2
    done = subprocess.run([ZARRFS, "check", str(path)], capture_output=True, text=True)
    assert done.returncode != 0 and "c/1/2/1/3/1" in done.stdout + done.stderr


def test_shards_of_a_rectilinear_grid(tmp_path: Path, mount_array: Any) -> None:
    """Shards of their own shapes, inner chunks (2, 3) regular across the array."""
    shape = (11, 12)
    path = tmp_path / "a.zarr"
    write_array(path, shape, [[4, 2, 6], [[6, 2]]], values_of(shape), skip={(1, 1)}, inner=(2, 3))
    expected = assemble(path)
    m = mount_array(path, ["rw"])
    assert np.array_equal(np.fromfile(m.data, dtype=DTYPE).reshape(shape), expected)
    shard = np.fromfile(m.chunk("c/2/0"), dtype=DTYPE).reshape(6, 6)
    assert np.array_equal(shard[:5], expected[6:11, :6]) and (shard[5:] == FILL).all()
    a = np.memmap(m.data, dtype=DTYPE, mode="r+", shape=shape)
    a[3:8, 5:12] = 999
    a.flush()
    del a
    expected[3:8, 5:12] = 999
    with pytest.raises(OSError) as refused:  # past the edges by 1: an edge the inner 2 do not divide
        os.truncate(m.data, 13 * 12 * DTYPE.itemsize)
    assert refused.value.errno == errno.EINVAL
    assert m.unmount() == 0
    assert np.array_equal(assemble(path), expected)
    assert stored_chunks(path)[(1, 1)].shape == (2, 6)
    assert json.loads((path / "zarr.json").read_text())["shape"] == [11, 12]
    write_array(tmp_path / "b.zarr", (6, 6), [[4, 2], 6], values_of((6, 6)), inner=(4, 3))
    done = subprocess.run([ZARRFS, "info", str(tmp_path / "b.zarr")], capture_output=True, text=True)
    assert done.returncode != 0 and "chunk_shapes[0]: an edge is not a multiple" in done.stderr


ZARR_PYTHON_32 = Path(__file__).parent / "data" / "zarr-python-3.2"


@pytest.mark.parametrize("name", ["plain", "sharded"])
def test_arrays_zarr_python_32_wrote(tmp_path: Path, mount_array: Any, name: str) -> None:
    """Written by zarr-python 3.2 (tests/data/zarr-python-3.2/make.py), `plain` then shrunk
    by it (edges past the end); each against what zarr-python 3.2 read back, then written
    through the mount and read back by the numcodecs oracle."""
    path = tmp_path / f"{name}.zarr"
    shutil.copytree(ZARR_PYTHON_32 / f"{name}.zarr", path)
    expected = np.load(ZARR_PYTHON_32 / f"{name}.npy")
    m = mount_array(path, ["rw"])
    assert np.array_equal(np.fromfile(m.data, dtype=DTYPE).reshape(expected.shape), expected)
    a = np.memmap(m.data, dtype=DTYPE, mode="r+", shape=expected.shape)
    a[1:10, 2:7] = 31337
    a.flush()
    del a
    expected[1:10, 2:7] = 31337
    assert m.unmount() == 0
    assert np.array_equal(assemble(path), expected)


def test_strings_zarr_python_32_wrote_on_a_rectilinear_grid(tmp_path: Path, mount_array: Any) -> None:
    m = mount_array(ZARR_PYTHON_32 / "strings.zarr")
    expected = json.loads((ZARR_PYTHON_32 / "strings.json").read_text())
    text = "".join(s.replace("\\", "\\\\").replace("\n", "\\n") + "\n" for s in expected)
    assert (m.path / "data.txt").read_text() == text


def test_resize_in_a_group_updates_its_consolidated_metadata(tmp_path: Path, mount_array: Any) -> None:
    group = tmp_path / "g.zarr"
    write_array(group / "a", (6, 4), [[2, 4], 4], values_of((6, 4)))
    doc = json.loads((group / "a/zarr.json").read_text())
    (group / "zarr.json").write_text(json.dumps({
        "zarr_format": 3, "node_type": "group", "attributes": {},
        "consolidated_metadata": {"kind": "inline", "must_understand": False, "metadata": {"a": doc}}}))
    m = mount_array(group, ["rw"])
    os.truncate(m.path / "a/data", 9 * 4 * DTYPE.itemsize)
    listed = json.loads((group / "zarr.json").read_text())["consolidated_metadata"]["metadata"]["a"]
    for found in (listed, json.loads((group / "a/zarr.json").read_text())):
        assert found["shape"] == [9, 4]
        assert found["chunk_grid"]["configuration"]["chunk_shapes"] == [[2, 4, 3], 4]
    assert sorted(os.listdir(m.path / "a/chunks/c")) == ["0", "1", "2"]


def test_sequential_reads_of_a_large_array_stream(tmp_path: Path, mount_array: Any) -> None:
    """12 MB: dd is read ahead (streams), a column and a block read chunk by chunk."""
    shape = (2000, 3000)
    path = tmp_path / "a.zarr"
    write_array(path, shape, [[37, 400, 1, 250, [300, 3], 413], [[700, 4], 201]], values_of(shape),
                skip={(2, 1), (5, 4)})
    expected = assemble(path)
    m = mount_array(path)
    out = tmp_path / "out.bin"
    subprocess.run(["dd", f"if={m.data}", f"of={out}", "bs=1M", "status=none"], check=True)
    assert np.array_equal(np.fromfile(out, dtype=DTYPE).reshape(shape), expected)
    a = np.memmap(m.data, dtype=DTYPE, mode="r", shape=shape)
    assert np.array_equal(a[:, 2899], expected[:, 2899])
    assert np.array_equal(a[1337:1500, 690:710], expected[1337:1500, 690:710])
    del a
