"""Arrays made by writing `.npy` files into a mounted group (`cp x.npy MNT/g/`, `np.save`):
every data type each format holds, C and Fortran order, either byte order, in v3 and v2
groups; the chunk rule and `new_codec=`/`new_chunks=`; bad headers, types the format cannot
hold and writes past the end refused with nothing left in the store. zarr-python (through the
consolidated metadata it trusts) and TensorStore read what landed."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tensorstore as ts
import zarr

from tests.helpers.mounting import MountFactory
from zarrfs.formats.creation import auto_chunks

DTYPES = ["?", "i1", "<i2", "<i4", "<i8", "u1", "<u2", "<u4", "<u8", "<f2", "<f4", "<f8", "<c8", "<c16"]


def _group(path: Path, zarr_format: int) -> None:
    group = zarr.open_group(path, mode="w", zarr_format=zarr_format)  # type: ignore[arg-type]
    group.create_array("a", shape=(4,), dtype="<i2", chunks=(2,))[...] = 7
    group.create_group("s")
    zarr.consolidate_metadata(path)


def _values(dtype: str, shape: tuple[int, ...] = (37, 29)) -> np.ndarray:
    rng = np.random.default_rng(len(dtype) + ord(dtype[-1]))
    values = rng.integers(0, 100, size=shape)
    if np.dtype(dtype).kind == "c":
        return (values + 1j * values[::-1]).astype(dtype)
    return (values % 2 if dtype == "?" else values).astype(dtype)


def _consolidated(path: Path) -> zarr.Group:
    return zarr.open_consolidated(path, mode="r")


def _fails(code: int, action: Any) -> None:
    with pytest.raises(OSError) as caught:
        action()
    assert caught.value.errno == code, caught.value


@pytest.mark.parametrize("zarr_format", [3, 2])
def test_cp_of_npy_files_of_every_dtype_makes_arrays(tmp_path: Path, mount_array: MountFactory,
                                                     zarr_format: int) -> None:
    store = tmp_path / "g.zarr"
    _group(store, zarr_format)
    mount = mount_array(store, ["rw"])
    for dtype in DTYPES:
        source = tmp_path / f"x{np.dtype(dtype).str[1:]}.npy"
        np.save(source, _values(dtype))
        subprocess.run(["cp", str(source), str(mount.path / "s")], check=True)
    listed = set(os.listdir(mount.path / "s"))
    names = {f"x{np.dtype(d).str[1:]}" for d in DTYPES}
    assert names <= listed and not any(n.endswith(".npy") for n in listed)  # (gone once closed)
    group = _consolidated(store)
    for dtype in DTYPES:
        name = f"x{np.dtype(dtype).str[1:]}"
        expected = _values(dtype)
        stored = group[f"s/{name}"]
        assert isinstance(stored, zarr.Array)
        assert stored.dtype == np.dtype(dtype) and np.array_equal(stored[...], expected), dtype
        assert np.array_equal(np.load(mount.path / "s" / name / "data.npy"), expected)
        shown = np.fromfile(mount.path / "s" / name / "data", dtype=np.dtype(dtype).newbyteorder("<"))
        assert np.array_equal(shown.reshape(expected.shape), expected)
    driver = "zarr3" if zarr_format == 3 else "zarr"
    opened = ts.open({"driver": driver, "kvstore": f"file://{store}/s/xf8"}).result()
    assert np.array_equal(opened.read().result(), _values("<f8"))


@pytest.mark.fast
@pytest.mark.parametrize("zarr_format", [3, 2])
def test_np_save_big_endian_fortran_and_rank_one(tmp_path: Path, mount_array: MountFactory,
                                                 zarr_format: int) -> None:
    store = tmp_path / "g.zarr"
    _group(store, zarr_format)
    mount = mount_array(store, ["rw"])
    cases = {
        "big": _values(">f4", (300, 700)),  # 840 kB: more than one write
        "fortran": np.asfortranarray(_values("<i8", (50, 60, 7))),
        "line": np.arange(100_000, dtype=">u2"),
        "empty": np.zeros((0, 5), "<f4"),
    }
    for name, values in cases.items():
        np.save(mount.path / f"{name}.npy", values)
    group = _consolidated(store)
    for name, values in cases.items():
        stored = group[name]
        assert isinstance(stored, zarr.Array)
        assert stored.shape == values.shape and np.array_equal(stored[...], values), name
        assert np.array_equal(np.load(mount.path / name / "data.npy"), values)


def test_dd_in_pieces_and_the_file_while_it_is_written(tmp_path: Path, mount_array: MountFactory) -> None:
    store = tmp_path / "g.zarr"
    _group(store, 3)
    values = _values("<u2", (1000, 300))
    np.save(tmp_path / "x.npy", values)
    mount = mount_array(store, ["rw"])
    raw = (tmp_path / "x.npy").read_bytes()
    target = mount.path / "x.npy"
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, raw[:5])  # a header in pieces
        assert "x.npy" in os.listdir(mount.path)
        os.write(fd, raw[5:4096])
        for start in range(4096, len(raw), 65536):
            assert os.pwrite(fd, raw[start : start + 65536], start) == len(raw[start : start + 65536])
        assert os.stat(target).st_size == len(raw)
        assert np.array_equal(np.load(mount.path / "x" / "data.npy"), values)  # before the close
        _fails(errno.EFBIG, lambda: os.pwrite(fd, b"\0\0", len(raw)))
    finally:
        os.close(fd)
    assert "x.npy" not in os.listdir(mount.path)
    assert np.array_equal(zarr.open_array(store / "x", mode="r")[...], values)


def test_chunks_codec_and_options(tmp_path: Path, mount_array: MountFactory) -> None:
    store = tmp_path / "g.zarr"
    _group(store, 3)
    values = _values("<f8", (2000, 300))
    np.save(tmp_path / "x.npy", values)
    mount = mount_array(store, ["rw"])
    shutil.copy(tmp_path / "x.npy", mount.path / "auto.npy")
    mount.unmount()
    document = json.loads((store / "auto" / "zarr.json").read_text())
    chunks = document["chunk_grid"]["configuration"]["chunk_shape"]
    assert tuple(chunks) == auto_chunks(values.shape, 8) == (436, 300)  # about 1 MiB of whole rows
    assert [c["name"] for c in document["codecs"]] == ["bytes", "zstd"]

    mount = mount_array(store, ["rw", "new_codec=gzip:4", "new_chunks=256:100"])
    shutil.copy(tmp_path / "x.npy", mount.path / "set.npy")
    mount.unmount()
    document = json.loads((store / "set" / "zarr.json").read_text())
    assert document["chunk_grid"]["configuration"]["chunk_shape"] == [256, 100]
    assert document["codecs"][1] == {"name": "gzip", "configuration": {"level": 4}}
    assert np.array_equal(zarr.open_array(store / "set", mode="r")[...], values)

    v2 = tmp_path / "v2.zarr"
    _group(v2, 2)
    mount = mount_array(v2, ["rw", "new_codec=none"])
    shutil.copy(tmp_path / "x.npy", mount.path / "x.npy")
    mount.unmount()
    assert json.loads((v2 / "x" / ".zarray").read_text())["compressor"] is None
    assert np.array_equal(zarr.open_array(v2 / "x", mode="r")[...], values)


def test_bad_streams_are_einval_and_leave_nothing(tmp_path: Path, mount_array: MountFactory) -> None:
    store = tmp_path / "g.zarr"
    _group(store, 3)
    before = sorted(str(p.relative_to(store)) for p in store.rglob("*"))
    mount = mount_array(store, ["rw"])
    structured = np.zeros(3, dtype=[("a", "<i4"), ("b", "<f4")])
    streams = {"garbage": b"this is not a .npy file at all\n" * 4, "strings": np.array(["ab", "c"]),
               "records": structured, "objects": b"\x93NUMPY\x01\x00v\x00{'descr': '|O', "
               b"'fortran_order': False, 'shape': (3,), }" + b" " * 61 + b"\n"}
    for name, content in streams.items():
        if isinstance(content, np.ndarray):
            path = tmp_path / f"{name}.npy"
            np.save(path, content)
            content = path.read_bytes()
        fd = os.open(mount.path / f"{name}.npy", os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            _fails(errno.EINVAL, lambda fd=fd, content=content: os.write(fd, content))
        finally:
            os.close(fd)
    _fails(errno.EPERM, lambda: (mount.path / "notes.txt").write_bytes(b"x"))
    _fails(errno.EEXIST, lambda: os.open(mount.path / "a.npy", os.O_WRONLY | os.O_CREAT | os.O_EXCL))
    assert sorted(os.listdir(mount.path)) == ["a", "data.h5", "data.nc", "s", "zarr.json"]
    assert sorted(str(p.relative_to(store)) for p in store.rglob("*")) == before


def test_zarrfs_create_chooses_chunks_by_the_same_rule(tmp_path: Path) -> None:
    from tests.helpers.mounting import ZARRFS

    subprocess.run([ZARRFS, "create", str(tmp_path / "c.zarr"), "--shape", "5000,3000", "--dtype", "uint16"],
                   check=True, capture_output=True)
    document = json.loads((tmp_path / "c.zarr" / "zarr.json").read_text())
    assert tuple(document["chunk_grid"]["configuration"]["chunk_shape"]) == auto_chunks((5000, 3000), 2)


@pytest.mark.parametrize("zarr_format", [3, 2])
def test_two_mounts_making_arrays_in_one_group_keep_both(tmp_path: Path, mount_array: MountFactory,
                                                         zarr_format: int) -> None:
    # Each array's creation rewrites the consolidated metadata above it as a compare-and-swap:
    # the mount that loses a race re-reads and adds its array to the winner's document.
    store = tmp_path / "g.zarr"
    _group(store, zarr_format)
    first, second = mount_array(store, ["rw"]), mount_array(store, ["rw"])
    made = {}
    for index in range(4):
        for label, mount in (("one", first), ("two", second)):
            name = f"{label}{index}"
            made[name] = _values("<i4", (5 + index, 3)) + index
            np.save(mount.path / "s" / f"{name}.npy", made[name])
    group = _consolidated(store)
    for name, expected in made.items():
        stored = group[f"s/{name}"]
        assert isinstance(stored, zarr.Array) and np.array_equal(stored[...], expected), name


def test_a_second_npy_of_a_name_is_eexist_at_once_and_later(tmp_path: Path,
                                                            mount_array: MountFactory) -> None:
    """Within the 30 s the closed NAME.npy is still found by its name, as after: EEXIST (it
    was an internal error, EIO), and the first array is left as it was."""
    store = tmp_path / "g.zarr"
    _group(store, 3)
    mount = mount_array(store, ["rw"])
    first, second = np.arange(12, dtype="<i4").reshape(3, 4), np.ones((5,), dtype="<f8")
    source = tmp_path / "x.npy"
    np.save(source, first)
    subprocess.run(["cp", str(source), str(mount.path / "s")], check=True)
    np.save(source, second)
    again = subprocess.run(["cp", str(source), str(mount.path / "s")], capture_output=True, text=True)
    assert again.returncode != 0 and "File exists" in again.stderr, again.stderr
    _fails(errno.EEXIST, lambda: np.save(mount.path / "s" / "x.npy", second))
    _fails(errno.EEXIST, lambda: os.open(mount.path / "s" / "x.npy", os.O_WRONLY))
    assert np.array_equal(np.load(mount.path / "s" / "x" / "data.npy"), first)
    assert np.array_equal(_consolidated(store)["s/x"][...], first)
    assert "Traceback" not in mount.log() and "ERROR" not in mount.log()
