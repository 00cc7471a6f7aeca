"""Resizing an array through `data` on a real rw mount (TensorStore's resize semantics), with
zarr-python and TensorStore reading the store as the oracles.

`truncate`/`ftruncate` to a whole number of rows sets shape[0]; `O_TRUNC` empties the array;
a write at or past the end (append, pwrite) grows it by whole rows, the unwritten elements
holding the fill value. Shrinking deletes the chunks wholly outside the new shape and resets
the cut part of the edge chunks, so growing again (by zarrfs or by zarr-python itself) reads
the fill value, never old data. Consolidated metadata of the groups above follows. Other
sizes are refused: a partial row (EINVAL), rank 0 (EINVAL), chunk files (EPERM/EFBIG).
"""

from __future__ import annotations

import errno
import json
import os
import zlib
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pytest
import tensorstore as ts
import zarr

SHAPE = (10, 6)
FILL = -7
ROW = 6 * 2  # bytes in one row of `data` (int16)
KINDS = ["v3", "v3-sharded", "v2"]


def _values(shape: tuple[int, ...] = SHAPE) -> np.ndarray:
    return (np.arange(int(np.prod(shape)), dtype=np.int16) * 37 + 1).reshape(shape)


def _create(path: Path, kind: str, values: np.ndarray | None = None) -> np.ndarray:
    """A (10, 6) int16 array with fill value -7: v3 with chunks (4, 3); v3 with shards (4, 6)
    of (2, 3) chunks; v2 with chunks (4, 3). Chunk grid: 3 rows of chunks (shards)."""
    values = _values() if values is None else values
    if kind == "v2":
        array = zarr.create_array(path, shape=values.shape, dtype="<i2", chunks=(4, 3), fill_value=FILL,
                                  zarr_format=2)
    else:
        array = zarr.create_array(path, shape=values.shape, dtype="<i2", fill_value=FILL,
                                  chunks=(2, 3) if kind == "v3-sharded" else (4, 3),
                                  shards=(4, 6) if kind == "v3-sharded" else None)
    array[...] = values
    return values.copy()


def _member(group: zarr.Group, key: str) -> zarr.Array[Any]:
    array = group[key]
    assert isinstance(array, zarr.Array)
    return array


def _zarr(path: Path) -> np.ndarray:
    return np.asarray(zarr.open_array(path, mode="r")[...])


def _tensorstore(path: Path, kind: str) -> np.ndarray:
    spec = {"driver": "zarr" if kind == "v2" else "zarr3", "kvstore": {"driver": "file", "path": str(path)}}
    return np.asarray(ts.open(spec, open=True).result().read().result())


def _stored_shape(path: Path, kind: str) -> list[int]:
    meta = json.loads((path / (".zarray" if kind == "v2" else "zarr.json")).read_bytes())
    return list(meta["shape"])


def _chunk_rows(directory: Path, kind: str) -> set[str]:
    """The first index of every chunk (shard) in a mount's `chunks/` (by listing) or in a
    store (by its files: a store may keep a directory emptied of chunks)."""
    if kind == "v2":
        return {name.split(".")[0] for name in os.listdir(directory) if name[0].isdigit()}
    c = directory / "c"
    if directory.name == "chunks":
        return set(os.listdir(c))
    return {p.relative_to(c).parts[0] for p in c.rglob("*") if p.is_file()} if c.exists() else set()


def _data(mount: Any) -> np.ndarray:
    return np.fromfile(mount.data, dtype="<i2").reshape(-1, SHAPE[1])


def _expect(path: Path, kind: str, want: np.ndarray) -> None:
    """The store holds `want`, for both readers."""
    assert _stored_shape(path, kind) == list(want.shape)
    assert np.array_equal(_zarr(path), want)
    assert np.array_equal(_tensorstore(path, kind), want)


# -- truncate, shrink then grow -----------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_truncate_shrinks_and_growing_again_reads_the_fill_value(tmp_path: Path, mount_array: Any,
                                                               kind: str) -> None:
    path = tmp_path / "a.zarr"
    want = _create(path, kind)
    assert _chunk_rows(path, kind) == {"0", "1", "2"}
    mount = mount_array(path, ["rw"])
    metadata = mount.path / (".zarray" if kind == "v2" else "zarr.json")
    assert _chunk_rows(mount.path / "chunks", kind) == {"0", "1", "2"}
    last = mount.chunk("2.0" if kind == "v2" else "c/2/0")
    assert last.stat().st_size > 0  # looked up: the kernel now knows the name

    os.truncate(mount.data, 5 * ROW)  # rows 0-4: the chunks of row 2 go, row 1 is cut
    assert mount.data.stat().st_size == 5 * ROW
    assert np.array_equal(_data(mount), want[:5])
    assert json.loads(metadata.read_bytes())["shape"] == [5, 6]
    assert _stored_shape(path, kind) == [5, 6]  # stored at once
    assert _chunk_rows(mount.path / "chunks", kind) == {"0", "1"}
    assert _chunk_rows(path, kind) == {"0", "1"}
    with pytest.raises(FileNotFoundError):
        last.stat()
    assert os.getxattr(mount.path, "user.zarr.shape") == b"5,6"

    os.truncate(mount.data, 10 * ROW)
    want[5:] = FILL
    assert np.array_equal(_data(mount), want)
    assert _chunk_rows(mount.path / "chunks", kind) == {"0", "1", "2"}
    assert last.stat().st_size > 0
    # The chunks of row 2 are not stored: they read as the fill value.
    assert _chunk_rows(path, kind) == {"0", "1"}
    assert (np.fromfile(last, dtype="<i2") == FILL).all()
    assert mount.unmount() == 0
    _expect(path, kind, want)


@pytest.mark.parametrize("kind", KINDS)
def test_shrinking_and_growing_after_a_full_read_forgets_what_was_read(tmp_path: Path, mount_array: Any,
                                                                      kind: str) -> None:
    # Read first: the shard indexes (sharded arrays) of what the shrink deletes or rewrites
    # are known then, and must not be used once the array grows again.
    path = tmp_path / "a.zarr"
    want = _create(path, kind)
    mount = mount_array(path, ["rw"])
    assert np.array_equal(_data(mount), want)
    os.truncate(mount.data, 2 * ROW)
    os.truncate(mount.data, 10 * ROW)
    want[2:] = FILL
    assert np.array_equal(_data(mount), want)
    assert mount.unmount() == 0
    _expect(path, kind, want)


@pytest.mark.parametrize("kind", KINDS)
def test_shrink_clears_the_cut_part_of_stored_chunks(tmp_path: Path, mount_array: Any, kind: str) -> None:
    """After a shrink by zarrfs, growing the array with zarr-python's own resize (which only
    rewrites the metadata) shows the fill value: the cut region was cleared in the store."""
    path = tmp_path / "a.zarr"
    want = _create(path, kind)
    mount = mount_array(path, ["rw"])
    os.truncate(mount.data, 3 * ROW)
    assert mount.unmount() == 0
    _expect(path, kind, want[:3])
    array = zarr.open_array(path, mode="r+")
    array.resize(SHAPE)
    want[3:] = FILL
    assert np.array_equal(_zarr(path), want)
    assert np.array_equal(_tensorstore(path, kind), want)


def test_truncate_to_zero_and_o_trunc(tmp_path: Path, mount_array: Any) -> None:
    path = tmp_path / "a.zarr"
    _create(path, "v3")
    mount = mount_array(path, ["rw"])
    with open(mount.data, "wb") as f:  # O_TRUNC: shape[0] = 0
        assert os.fstat(f.fileno()).st_size == 0
        assert _stored_shape(path, "v3") == [0, 6]
        assert os.listdir(mount.path / "chunks" / "c") == []
        f.write(np.arange(12, dtype="<i2").tobytes())  # two rows again
    assert mount.data.stat().st_size == 2 * ROW
    assert np.array_equal(_data(mount), np.arange(12).reshape(2, 6))
    assert mount.unmount() == 0
    _expect(path, "v3", np.arange(12, dtype=np.int16).reshape(2, 6))
    assert _chunk_rows(path, "v3") == {"0"}


# -- growing by writing ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_append_grows_by_whole_rows(tmp_path: Path, mount_array: Any, kind: str) -> None:
    path = tmp_path / "a.zarr"
    want = _create(path, kind)
    mount = mount_array(path, ["rw"])
    new_chunk = mount.chunk("3.0" if kind == "v2" else "c/3/0")
    with pytest.raises(FileNotFoundError):  # looked up before it exists
        new_chunk.stat()
    added = np.arange(100, 115, dtype="<i2")  # 2.5 rows
    with open(mount.data, "ab") as f:
        f.write(added.tobytes())
        f.flush()
        os.fsync(f.fileno())
        assert os.fstat(f.fileno()).st_size == 13 * ROW
        grown = np.full((13, 6), FILL, dtype=np.int16)
        grown[:10] = want
        grown.reshape(-1)[60:75] = added
        # While mounted, after fsync: the store has the new shape and values.
        assert _stored_shape(path, kind) == [13, 6]
        assert np.array_equal(_zarr(path), grown)
    assert np.array_equal(_data(mount), grown)
    assert _chunk_rows(mount.path / "chunks", kind) == {"0", "1", "2", "3"}
    block = np.fromfile(new_chunk, dtype="<i2").reshape(4, -1)
    assert np.array_equal(block[:1], grown[12:13, : block.shape[1]]) and (block[1:] == FILL).all()
    # Appending again starts after the last whole row (whose end holds the fill value).
    with open(mount.data, "ab") as f:
        f.write(np.int16(999).tobytes())
    grown = np.concatenate([grown, np.full((1, 6), FILL, dtype=np.int16)])
    grown[13, 0] = 999
    assert mount.data.stat().st_size == 14 * ROW
    assert np.array_equal(_data(mount), grown)
    assert mount.unmount() == 0
    _expect(path, kind, grown)


@pytest.mark.parametrize("kind", KINDS)
def test_pwrite_past_the_end(tmp_path: Path, mount_array: Any, kind: str) -> None:
    path = tmp_path / "a.zarr"
    want = _create(path, kind)
    mount = mount_array(path, ["rw"])
    reader = os.open(mount.data, os.O_RDONLY)
    try:
        fd = os.open(mount.data, os.O_WRONLY)
        try:
            # Element [16, 2] and half of [16, 3]: a gap of 6 rows, then row 16, partly written.
            assert os.pwrite(fd, np.array([4242], dtype="<i2").tobytes() + b"\x11", 16 * ROW + 4) == 3
            os.fsync(fd)
            assert os.fstat(fd).st_size == 17 * ROW
        finally:
            os.close(fd)
        grown = np.full((17, 6), FILL, dtype=np.int16)
        grown[:10] = want
        grown[16, 2] = 4242
        grown[16, 3] = np.frombuffer(b"\x11" + np.int16(FILL).tobytes()[1:], dtype="<i2")[0]
        # An fd opened before the resize sees the new size and contents.
        assert os.fstat(reader).st_size == 17 * ROW
        assert os.pread(reader, 17 * ROW + 100, 0) == grown.tobytes()
        assert np.array_equal(_zarr(path), grown)
        assert (mount.path / "data.npy").stat().st_size > 17 * ROW
        assert np.load(mount.path / "data.npy").shape == (17, 6)
    finally:
        os.close(reader)
    assert mount.unmount() == 0
    _expect(path, kind, grown)


def test_other_fds_see_each_resize(tmp_path: Path, mount_array: Any) -> None:
    path = tmp_path / "a.zarr"
    want = _create(path, "v3-sharded")
    mount = mount_array(path, ["rw"])
    fds = [os.open(mount.data, os.O_RDONLY), os.open(mount.data, os.O_RDWR)]
    try:
        assert [os.fstat(fd).st_size for fd in fds] == [10 * ROW] * 2
        os.ftruncate(fds[1], 4 * ROW)
        assert [os.fstat(fd).st_size for fd in fds] == [4 * ROW] * 2
        assert os.stat(mount.data).st_size == 4 * ROW
        assert os.pread(fds[0], 10 * ROW, 0) == want[:4].tobytes()
        os.truncate(mount.data, 7 * ROW)
        assert [os.fstat(fd).st_size for fd in fds] == [7 * ROW] * 2
        grown = np.full((7, 6), FILL, dtype=np.int16)
        grown[:4] = want[:4]
        assert os.pread(fds[0], 10 * ROW, 0) == grown.tobytes()
    finally:
        for fd in fds:
            os.close(fd)
    assert mount.unmount() == 0
    _expect(path, "v3-sharded", grown)


# -- Fortran order ------------------------------------------------------------------------------


def test_fortran_order_resizes_the_last_dimension(tmp_path: Path, mount_array: Any) -> None:
    path = tmp_path / "a.zarr"
    want = _create(path, "v3")
    mount = mount_array(path, ["rw", "order=F"])
    column = SHAPE[0] * 2
    os.truncate(mount.data, 4 * column)  # keep columns 0-3
    assert _stored_shape(path, "v3") == [10, 4]
    flat = np.fromfile(mount.data, dtype="<i2")
    assert np.array_equal(flat.reshape((10, 4), order="F"), want[:, :4])
    with open(mount.data, "ab") as f:  # one more column, half written
        f.write(np.arange(500, 505, dtype="<i2").tobytes())
    grown = np.full((10, 5), FILL, dtype=np.int16)
    grown[:, :4] = want[:, :4]
    grown[:5, 4] = np.arange(500, 505)
    assert mount.unmount() == 0
    _expect(path, "v3", grown)
    again = mount_array(path, ["rw", "order=F"])
    with pytest.raises(OSError) as refused:  # a partial column, as a partial row in C order
        os.truncate(again.data, 4 * column + 2)
    assert refused.value.errno == errno.EINVAL


# -- Zarr v1 ------------------------------------------------------------------------------------


def _read_v1(path: Path) -> np.ndarray:
    """Decode a v1 array (zlib, C order) per the specification, from its files alone."""
    meta = json.loads((path / "meta").read_text())
    shape, chunks = tuple(meta["shape"]), tuple(meta["chunks"])
    out = np.full(shape, meta["fill_value"], dtype=meta["dtype"])
    for index in np.ndindex(*(-(-n // c) for n, c in zip(shape, chunks, strict=True))):
        key = path / ".".join(map(str, index))
        if key.exists():
            block = np.frombuffer(zlib.decompress(key.read_bytes()), dtype=meta["dtype"]).reshape(chunks)
            where = tuple(slice(i * c, min((i + 1) * c, n))
                          for i, c, n in zip(index, chunks, shape, strict=True))
            out[where] = block[tuple(slice(0, w.stop - w.start) for w in where)]
    return out


def test_v1_array(tmp_path: Path, mount_array: Any) -> None:
    path = tmp_path / "v1"
    path.mkdir()
    want = _values()
    meta = {"zarr_format": 1, "shape": list(SHAPE), "chunks": [4, 3], "dtype": "<i2", "compression": "zlib",
            "compression_opts": 1, "fill_value": FILL, "order": "C"}
    (path / "meta").write_text(json.dumps(meta, indent=4, sort_keys=True))
    for i, j in np.ndindex(3, 2):
        block = np.full((4, 3), FILL, dtype="<i2")
        part = want[i * 4 : i * 4 + 4, j * 3 : j * 3 + 3]
        block[: part.shape[0], : part.shape[1]] = part
        (path / f"{i}.{j}").write_bytes(zlib.compress(block.tobytes(), 1))
    assert np.array_equal(_read_v1(path), want)
    mount = mount_array(path, ["rw"])
    os.truncate(mount.data, 3 * ROW)
    assert json.loads((mount.path / "meta").read_bytes())["shape"] == [3, 6]
    assert sorted(os.listdir(mount.path / "chunks")) == ["0.0", "0.1"]
    with open(mount.data, "ab") as f:
        f.write(np.arange(8, dtype="<i2").tobytes())
    assert mount.unmount() == 0
    stored = json.loads((path / "meta").read_text())
    assert stored == {**meta, "shape": [5, 6]}
    grown = np.full((5, 6), FILL, dtype=np.int16)
    grown[:3] = want[:3]
    grown.reshape(-1)[18:26] = np.arange(8)
    assert np.array_equal(_read_v1(path), grown)
    assert sorted(p.name for p in path.iterdir()) == ["0.0", "0.1", "1.0", "meta"]  # 1.1: all fill


# -- consolidated metadata ----------------------------------------------------------------------


@pytest.mark.parametrize("fmt", [2, 3])
def test_consolidated_metadata_follows(tmp_path: Path, mount_array: Any, fmt: Literal[2, 3]) -> None:
    """An array in a subgroup of a group with consolidated metadata (v2 `.zmetadata`, v3
    inline): zarr-python reads the shape from there, so it must follow."""
    path = tmp_path / "group.zarr"
    root = zarr.open_group(path, mode="w", zarr_format=fmt)
    sub = root.create_group("sub")
    kept = root.create_array("kept", shape=(4, 4), dtype="<i2", chunks=(2, 2), fill_value=0)
    kept[...] = 5
    nested = sub.create_array("nested", shape=SHAPE, dtype="<i2", chunks=(4, 3), fill_value=FILL)
    nested[...] = _values()
    zarr.consolidate_metadata(path, zarr_format=fmt)
    consolidated = ".zmetadata" if fmt == 2 else "zarr.json"
    metadata_name = ".zarray" if fmt == 2 else "zarr.json"

    mount = mount_array(path, ["rw"])
    before = (mount.path / consolidated).read_bytes()
    with open(mount.path / "sub" / "nested" / "data", "ab") as f:
        f.write(b"\0" * ROW * 2)
    group = zarr.open_group(path, mode="r", use_consolidated=True)
    assert _member(group, "sub/nested").shape == (12, 6)
    assert (mount.path / consolidated).read_bytes() != before
    shown = json.loads((mount.path / consolidated).read_bytes())
    if fmt == 2:
        assert shown["metadata"]["sub/nested/.zarray"]["shape"] == [12, 6]
        assert shown["metadata"]["kept/.zarray"]["shape"] == [4, 4]
    else:
        assert shown["consolidated_metadata"]["metadata"]["sub/nested"]["shape"] == [12, 6]
    assert (mount.path / consolidated).read_bytes() == (path / consolidated).read_bytes()
    assert json.loads((mount.path / "sub" / "nested" / metadata_name).read_bytes())["shape"] == [12, 6]
    assert mount.unmount() == 0
    group = zarr.open_group(path, mode="r", use_consolidated=True)
    want = np.full((12, 6), FILL, dtype=np.int16)
    want[:10] = _values()
    want[10:] = 0
    assert np.array_equal(np.asarray(_member(group, "sub/nested")[...]), want)
    assert np.array_equal(np.asarray(_member(group, "kept")[...]), np.full((4, 4), 5))


def test_array_in_a_plain_group(tmp_path: Path, mount_array: Any) -> None:
    """Without consolidated metadata: the array's own metadata is all there is to change."""
    path = tmp_path / "group.zarr"
    root = zarr.open_group(path, mode="w", zarr_format=3)
    root.create_group("sub").create_array("nested", shape=SHAPE, dtype="<i2", chunks=(4, 3),
                                          fill_value=FILL)[...] = _values()
    mount = mount_array(path, ["rw"])
    os.truncate(mount.path / "sub" / "nested" / "data", 2 * ROW)
    assert _member(zarr.open_group(path, mode="r"), "sub/nested").shape == (2, 6)
    assert sorted(os.listdir(mount.path / "sub" / "nested" / "chunks" / "c")) == ["0"]
    assert mount.unmount() == 0
    _expect(path / "sub" / "nested", "v3", _values()[:2])


# -- what cannot be resized -----------------------------------------------------------------------


@pytest.mark.fast
def test_partial_rows_are_refused(tmp_path: Path, mount_array: Any) -> None:
    path = tmp_path / "a.zarr"
    want = _create(path, "v3")
    mount = mount_array(path, ["rw"])
    for size in (5 * ROW + 1, 10 * ROW - 2, 11 * ROW + 6):
        with pytest.raises(OSError) as refused:
            os.truncate(mount.data, size)
        assert refused.value.errno == errno.EINVAL
    assert "refused to change the size" in mount.log()
    assert mount.data.stat().st_size == 10 * ROW
    assert _stored_shape(path, "v3") == [10, 6]
    assert np.array_equal(_data(mount), want)


def test_rank_0_cannot_be_resized(tmp_path: Path, mount_array: Any) -> None:
    path = tmp_path / "scalar.zarr"
    zarr.create_array(path, shape=(), dtype="<i4", fill_value=3)[...] = 12
    mount = mount_array(path, ["rw"])
    for size in (0, 8):
        with pytest.raises(OSError) as refused:
            os.truncate(mount.data, size)
        assert refused.value.errno == errno.EINVAL
    with open(mount.data, "r+b") as f, pytest.raises(OSError) as grown:
        os.pwrite(f.fileno(), b"\1\0\0\0", 4)
    assert grown.value.errno in (errno.EFBIG, errno.EINVAL)
    assert mount.data.read_bytes() == np.int32(12).tobytes()
    assert mount.unmount() == 0
    assert _zarr(path) == 12 and _stored_shape(path, "v3") == []


@pytest.mark.fast
def test_chunk_files_keep_their_size(tmp_path: Path, mount_array: Any) -> None:
    path = tmp_path / "a.zarr"
    want = _create(path, "v3-sharded")
    mount = mount_array(path, ["rw"])
    chunk = mount.chunk("c/1/0")
    size = chunk.stat().st_size
    assert size == 4 * 6 * 2
    for bad in (0, size - 2, size + ROW):
        with pytest.raises(OSError) as refused:
            os.truncate(chunk, bad)
        assert refused.value.errno == errno.EPERM
    with open(chunk, "r+b", buffering=0) as f, pytest.raises(OSError) as past:
        os.pwrite(f.fileno(), b"\0\0", size)
    assert past.value.errno == errno.EFBIG
    for name in ("zarr.json", "data.npy"):
        with pytest.raises(OSError) as fixed:
            os.truncate(mount.path / name, 0)
        assert fixed.value.errno in (errno.EPERM, errno.EACCES)
    assert mount.data.stat().st_size == 10 * ROW
    assert mount.unmount() == 0
    _expect(path, "v3-sharded", want)


def test_ro_mount_refuses_resizing(tmp_path: Path, mount_array: Any) -> None:
    path = tmp_path / "a.zarr"
    _create(path, "v3")
    mount = mount_array(path, ["ro"])
    with pytest.raises(OSError) as refused:
        os.truncate(mount.data, 5 * ROW)
    assert refused.value.errno == errno.EROFS
    assert _stored_shape(path, "v3") == [10, 6]
