"""Hierarchies and real-world datasets on a real mount, with the libraries that wrote them as
the oracles: xarray datasets (Zarr v2 and v3, consolidated or not), an OME-Zarr multiscale
image written by `ome-zarr`, nested zarr-python groups holding sharded arrays, groups holding
arrays zarrfs cannot present (variable-length strings, corrupt metadata), extended attributes,
and `zarrfs info` on groups.

What the writers put in the store (zarr 3.1, xarray 2026.9, ome-zarr 0.18):
- xarray v2: `.zgroup`, `.zattrs` (dataset attributes), `.zmetadata` when consolidated; per
  variable `.zarray` + `.zattrs` (holding `_ARRAY_DIMENSIONS`), chunk keys `0.1` (separator
  "."), blosc/lz4; a float variable's fill is "NaN", an int coordinate's fill is null.
- xarray v3: one `zarr.json` per node (consolidated: inline `consolidated_metadata` in the
  root's), `dimension_names` set, chunk keys `c/0/1`, zstd; float variables get a base64
  `_FillValue` attribute.
- datetime coordinates are CF-encoded: int64 counts with `units: "hours since ..."`.
- chunks that are all fill value (NaN) are not written at all.
- ome-zarr 0.18 into a v2 group: levels named `s0`, `s1`, ... (not `0`, `1`: read them from
  `multiscales[0].datasets[].path`), each a v2 array with dimension_separator "/", zstd, an
  empty `.zattrs`; five levels by default (scale factors 2, 4, 8, 16), metadata version 0.4.
- zarr-python v2 arrays always get a `.zattrs` (`{}`); vlen strings are v2 dtype `|O` with a
  `vlen-utf8` filter, v3 data type `string` with a `vlen-utf8` codec. zarr-python v3 ignores
  the byte order of a `>i2` dtype (stores `bytes` endian little): big-endian storage needs
  `serializer=BytesCodec(endian="big")`. With consolidated metadata, zarr-python lists only
  the consolidated children (an array created later does not show until re-consolidated).
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import subprocess
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import xarray as xr
import zarr
from ome_zarr.io import parse_url
from ome_zarr.reader import Reader
from ome_zarr.writer import write_image
from zarr.codecs import BytesCodec

from tests.helpers.mounting import VIEW_FILES, ZARRFS, is_mounted, without_views

METADATA_NAMES = {"zarr.json", ".zgroup", ".zattrs", ".zarray", ".zmetadata"}


# -- helpers ------------------------------------------------------------------------------------


def _zarrfs(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ZARRFS, *args], capture_output=True, text=True, timeout=60)


def _tree(root: Path) -> set[str]:
    """Every path under `root`, relative; directories end in '/'."""
    found = set()
    for directory, dirs, files in os.walk(root):
        rel = Path(directory).relative_to(root)
        found.update(f"{rel / d}/".removeprefix("./") for d in dirs)
        found.update(str(rel / f).removeprefix("./") for f in files)
    return found


def _assert_data(path: Path, expected: np.ndarray) -> None:
    """`path` holds `expected` flat, C order, little-endian."""
    dtype = expected.dtype.newbyteorder("<")
    assert path.stat().st_size == expected.size * expected.dtype.itemsize
    got = np.fromfile(path, dtype=dtype).reshape(expected.shape)
    assert np.array_equal(got, expected.astype(dtype), equal_nan=expected.dtype.kind in "fc")


def _assert_metadata_files_as_stored(mount_root: Path, store_root: Path) -> int:
    """Every metadata file in the mount has the stored bytes, and every stored metadata file
    of a node shows in the mount; how many were compared."""
    mounted_files = {p for p in _tree(mount_root) if Path(p).name in METADATA_NAMES}
    stored_files = {p for p in _tree(store_root) if Path(p).name in METADATA_NAMES}
    assert mounted_files == stored_files
    for rel in mounted_files:
        assert (mount_root / rel).read_bytes() == (store_root / rel).read_bytes(), rel
    return len(mounted_files)


def _assert_enoent(path: Path) -> None:
    with pytest.raises(OSError) as raised:
        os.stat(path)
    assert raised.value.errno == errno.ENOENT, (path, raised.value)


def _xattrs(path: Path) -> dict[str, str]:
    """The user.zarr.* extended attributes of `path`, by name."""
    names = [n for n in os.listxattr(path) if n.startswith("user.zarr.")]
    return {n: os.getxattr(path, n).decode() for n in names}


def _numbers(text: str) -> list[int]:
    return [int(n) for n in re.findall(r"\d+", text)]


def _contains_run(haystack: list[int], needle: list[int]) -> bool:
    return any(haystack[i : i + len(needle)] == needle for i in range(len(haystack)))


def _info_lines(source: Path) -> dict[str, str]:
    """`zarrfs info GROUP` as {node path: its line}; each node exactly once."""
    done = _zarrfs("info", str(source))
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    lines: dict[str, str] = {}
    for line in done.stdout.splitlines():
        match = re.match(r"\s*(/\S*?):?(\s|$)", line)
        if match and not Path(match.group(1)).is_relative_to(source):  # a header naming the source
            assert match.group(1) not in lines, f"{match.group(1)} listed twice:\n{done.stdout}"
            lines[match.group(1)] = line
    return lines


def _mount_fails(source: Path, mountpoint: Path) -> str:
    """Mount `source` (in the background), which must fail in one line; that line."""
    mountpoint.mkdir(exist_ok=True)
    try:
        done = _zarrfs("mount", str(source), str(mountpoint))
    finally:
        if is_mounted(mountpoint):
            subprocess.run(["fusermount3", "-u", str(mountpoint)], capture_output=True)
    assert done.returncode != 0, f"mounting {source} succeeded"
    assert "Traceback" not in done.stderr + done.stdout, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line on stderr, got:\n{done.stderr}"
    assert not is_mounted(mountpoint)
    return lines[0]


def _log_line_naming(log: str, *words: str) -> str:
    for line in log.splitlines():
        if all(w.lower() in line.lower() for w in words):
            return line
    raise AssertionError(f"no log line names {words}:\n{log}")


# -- xarray datasets ----------------------------------------------------------------------------

TIMES = pd.date_range("2021-03-01", periods=20, freq="h")


def _dataset() -> xr.Dataset:
    temp = np.arange(600, dtype="f4").reshape(20, 30) * 0.25 - 40
    temp[8:16, 16:30] = np.nan  # chunk (1, 1) is all fill value: not stored
    return xr.Dataset(
        {"temp": (("y", "x"), temp, {"units": "K", "long_name": "temperature"})},
        coords={"time": ("y", TIMES), "x": ("x", np.arange(30, dtype="i4") * 10)},
        attrs={"title": "zarrfs test", "version": 3},
    )


@pytest.mark.parametrize("consolidated", [True, False], ids=["consolidated", "listed"])
@pytest.mark.parametrize("fmt", [2, 3], ids=["v2", "v3"])
def test_xarray_dataset(fmt: int, consolidated: bool, tmp_path: Path, mount_array: Any) -> None:
    store = tmp_path / "ds.zarr"
    ds = _dataset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # consolidated metadata "not part of the v3 spec"
        ds.to_zarr(store, zarr_format=fmt, consolidated=consolidated,
                   encoding={"temp": {"chunks": (8, 16)}})
    if fmt == 2:
        root_meta = {".zgroup", ".zattrs"} | ({".zmetadata"} if consolidated else set())
        array_meta = {".zarray", ".zattrs"}
        temp_chunks = {f"{i}.{j}" for i in range(3) for j in range(2)}
        one_chunk = {"0"}
        assert not (store / "temp" / "1.1").exists()
    else:
        root_meta, array_meta = {"zarr.json"}, {"zarr.json"}
        temp_chunks = {"c/", *(f"c/{i}/" for i in range(3)),
                       *(f"c/{i}/{j}" for i in range(3) for j in range(2))}
        one_chunk = {"c/", "c/0"}
        assert not (store / "temp" / "c" / "1" / "1").exists()
        assert ("consolidated_metadata" in json.loads((store / "zarr.json").read_bytes())) == consolidated
    assert {p.name for p in store.iterdir() if p.is_file()} == root_meta

    mount = mount_array(store, ["ro"])
    assert set(os.listdir(mount.path)) == root_meta | {"data.nc", "data.h5", "temp", "time", "x"}
    for name in ("temp", "time", "x"):
        assert without_views(os.listdir(mount.path / name)) == sorted(array_meta | {"data", "chunks"})
    assert _tree(mount.path / "temp" / "chunks") == temp_chunks
    for name in ("time", "x"):
        assert _tree(mount.path / name / "chunks") == one_chunk
    _assert_metadata_files_as_stored(mount.path, store)

    # The raw stored values, as xarray (no decoding) and zarr-python read them.
    raw = xr.open_zarr(store, decode_times=False, mask_and_scale=False, consolidated=consolidated)
    group = zarr.open_group(store, mode="r")
    for name in ("temp", "time", "x"):
        expected = raw[name].values
        assert np.array_equal(expected, group[name][...], equal_nan=True)
        _assert_data(mount.path / name / "data", expected)
    assert raw["time"].dtype == np.int64 and raw["time"].attrs["units"].startswith("hours since 2021-03-01")

    # The datetime coordinate is CF-encoded: int64 hours since the first time.
    hours = np.fromfile(mount.path / "time" / "data", dtype="<i8")
    assert hours.tolist() == list(range(20))
    assert np.array_equal(np.datetime64("2021-03-01T00", "h") + hours.astype("m8[h]"), TIMES.values)
    assert np.fromfile(mount.path / "x" / "data", dtype="<i4").tolist() == list(range(0, 300, 10))

    # The unstored chunk reads as the fill value (NaN), a stored edge chunk as data + overhang.
    missing = np.fromfile(mount.path / "temp" / ("chunks/1.1" if fmt == 2 else "chunks/c/1/1"), dtype="<f4")
    assert missing.size == 8 * 16 and np.isnan(missing).all()
    edge = np.fromfile(mount.path / "temp" / ("chunks/2.1" if fmt == 2 else "chunks/c/2/1"),
                       dtype="<f4").reshape(8, 16)
    values = ds["temp"].values
    assert np.array_equal(edge[:4, :14], values[16:20, 16:30])
    assert np.isnan(edge[4:, :]).all() and np.isnan(edge[:, 14:]).all()

    # Extended attributes of the variable and of the dataset (the root group).
    attrs = _xattrs(mount.path / "temp")
    assert attrs["user.zarr.shape"] == "20,30"
    assert attrs["user.zarr.dtype"] == "<f4"
    assert attrs["user.zarr.chunks"] == "8,16"
    assert json.loads(attrs["user.zarr.fill_value"]) == "NaN"
    assert json.loads(attrs["user.zarr.attributes"]) == group["temp"].attrs.asdict()
    assert "user.zarr.inner_chunks" not in attrs
    if fmt == 3:
        assert json.loads(attrs["user.zarr.dimension_names"]) == ["y", "x"]
    assert _xattrs(mount.path / "temp" / "data") == attrs
    assert json.loads(_xattrs(mount.path)["user.zarr.attributes"]) == {"title": "zarrfs test", "version": 3}
    assert json.loads(_xattrs(mount.path / "time")["user.zarr.attributes"])["units"].startswith("hours")

    _assert_enoent(mount.path / "pressure")
    _assert_enoent(mount.path / "temp" / "chunks" / ("3.0" if fmt == 2 else "c/3/0"))
    _assert_enoent(mount.path / ("zarr.json" if fmt == 2 else ".zgroup"))


def test_xarray_dataset_info(tmp_path: Path) -> None:
    store = tmp_path / "ds.zarr"
    _dataset().to_zarr(store, zarr_format=2, consolidated=True, encoding={"temp": {"chunks": (8, 16)}})
    lines = _info_lines(store)
    assert set(lines) == {"/", "/temp", "/time", "/x"}
    assert "group" in lines["/"]
    assert "array" in lines["/temp"] and _contains_run(_numbers(lines["/temp"]), [20, 30])
    assert _contains_run(_numbers(lines["/temp"]), [8, 16])
    assert "array" in lines["/time"] and 20 in _numbers(lines["/time"])
    done = _zarrfs("info", str(store / "temp"))  # an array inside a group, on its own
    assert done.returncode == 0, done.stderr
    pairs = (line.partition(":") for line in done.stdout.splitlines())
    rows = {label.strip().lower(): value.strip() for label, _, value in pairs}
    assert rows["zarr format"] == "2"
    assert _contains_run(_numbers(rows["shape"]), [20, 30])


@pytest.mark.parametrize("fmt", [2, 3], ids=["v2", "v3"])
def test_consolidated_metadata_lists_the_children(fmt: int, tmp_path: Path, mount_array: Any) -> None:
    """With consolidated metadata the children are the consolidated ones, as zarr-python sees
    them: an array added later without consolidating again does not show."""
    store = tmp_path / "group.zarr"
    root = zarr.create_group(store, zarr_format=fmt, attributes={"c": 1})
    root.create_array("a", shape=(4,), dtype="<i2", chunks=(2,))[:] = [1, 2, 3, 4]
    root.create_group("g").create_array("b", shape=(3,), dtype="<u1", chunks=(3,))[:] = [5, 6, 7]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # consolidated metadata "not part of the v3 spec"
        zarr.consolidate_metadata(store)
        root.create_array("late", shape=(2,), dtype="<i2", chunks=(2,))
        seen = zarr.open_group(store, mode="r")
        assert sorted(seen.keys()) == ["a", "g"]
        assert sorted(zarr.open_group(store, mode="r", use_consolidated=False).keys()) == ["a", "g", "late"]
    mount = mount_array(store, ["ro"])
    views = {"data.nc", "data.h5"}
    group_meta = views | ({".zgroup", ".zattrs"} if fmt == 2 else {"zarr.json"})
    assert set(os.listdir(mount.path)) == group_meta | ({".zmetadata"} if fmt == 2 else set()) | {"a", "g"}
    assert set(os.listdir(mount.path / "g")) == group_meta | {"b"}
    _assert_data(mount.path / "a" / "data", np.array([1, 2, 3, 4], "<i2"))
    _assert_data(mount.path / "g" / "b" / "data", np.array([5, 6, 7], "<u1"))
    _assert_enoent(mount.path / "late")
    assert set(_info_lines(store)) == {"/", "/a", "/g", "/g/b"}


@pytest.mark.parametrize("fmt", [2, 3], ids=["v2", "v3"])
def test_xarray_dataset_edited_through_the_mount(fmt: int, tmp_path: Path, mount_array: Any) -> None:
    """Fill the unstored all-NaN chunk with values, blank a stored chunk to all NaN (so it is
    deleted from the store), rewrite a coordinate; xarray reads the edits back."""
    store = tmp_path / "ds.zarr"
    ds = _dataset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds.to_zarr(store, zarr_format=fmt, consolidated=True, encoding={"temp": {"chunks": (8, 16)}})
    expected = ds["temp"].values.copy()
    mount = mount_array(store)
    key = (lambda i, j: f"{i}.{j}") if fmt == 2 else (lambda i, j: f"c/{i}/{j}")
    filled = np.arange(8 * 16, dtype="<f4").reshape(8, 16) + 0.5
    with open(mount.path / "temp" / "chunks" / key(1, 1), "r+b") as f:  # no O_TRUNC: a fixed size
        f.write(filled.tobytes())
    expected[8:16, 16:30] = filled[:, :14]
    with open(mount.path / "temp" / "data", "r+b") as f:
        for row in range(8):
            f.seek(row * 30 * 4)
            f.write(np.full(16, np.nan, "<f4").tobytes())
    expected[:8, :16] = np.nan
    with open(mount.path / "x" / "data", "r+b") as f:
        f.write(np.array([-5, -6], "<i4").tobytes())
    assert mount.unmount() == 0

    stored = store / "temp" / (key(0, 0) if fmt == 2 else "c/0/0")
    assert not stored.exists()
    assert (store / "temp" / (key(1, 1) if fmt == 2 else "c/1/1")).exists()
    reread = xr.open_zarr(store, decode_times=True)
    assert np.array_equal(reread["temp"].values, expected, equal_nan=True)
    assert reread["x"].values[:3].tolist() == [-5, -6, 20]
    assert np.array_equal(reread["time"].values, TIMES.values)
    assert reread.attrs == {"title": "zarrfs test", "version": 3}


# -- OME-Zarr -------------------------------------------------------------------------------------


def test_ome_zarr_multiscale_image(tmp_path: Path, mount_array: Any) -> None:
    store = tmp_path / "image.ome.zarr"
    image = (np.arange(2 * 64 * 80, dtype=np.uint32) * 2654435761 % 251).astype(np.uint8).reshape(2, 64, 80)
    root = zarr.open_group(store, mode="w", zarr_format=2)
    write_image(image, root, axes="cyx", storage_options={"chunks": (1, 32, 32)})

    multiscales = json.loads((store / ".zattrs").read_bytes())["multiscales"]
    levels = [d["path"] for d in multiscales[0]["datasets"]]
    assert len(levels) == 5
    reader_node = next(iter(Reader(parse_url(str(store)))()))
    pyramid = [np.asarray(level) for level in reader_node.data]
    assert len(pyramid) == len(levels)
    assert np.array_equal(pyramid[0], image)
    for level in levels:
        zarray = json.loads((store / level / ".zarray").read_bytes())
        assert zarray["dimension_separator"] == "/" and zarray["zarr_format"] == 2

    mount = mount_array(store, ["ro"])
    # (data.tif: the levels as a cloud-optimized GeoTIFF)
    views = {"data.nc", "data.h5", "data.ome.tif", "data.tif"}
    assert set(os.listdir(mount.path)) == {".zgroup", ".zattrs", *views, *levels}
    assert _assert_metadata_files_as_stored(mount.path, store) == 2 + 2 * len(levels)
    for index, level in enumerate(levels):
        assert without_views(os.listdir(mount.path / level)) == [".zarray", ".zattrs", "chunks", "data"]
        expected = zarr.open_array(store / level, mode="r")[...]
        assert np.array_equal(expected, pyramid[index])
        assert expected.shape == (2, 64 >> index, 80 >> index)
        _assert_data(mount.path / level / "data", expected)

    # Chunk files are nested directories, one level per dimension.
    s0 = mount.path / levels[0] / "chunks"
    assert {p for p in _tree(s0) if not p.endswith("/")} == {
        f"{c}/{i}/{j}" for c in range(2) for i in range(2) for j in range(3)}
    assert sorted(os.listdir(s0)) == ["0", "1"] and sorted(os.listdir(s0 / "1")) == ["0", "1"]
    padded = np.zeros((2, 64, 96), np.uint8)
    padded[:, :, :80] = image
    for c, i, j in [(0, 0, 0), (1, 1, 1), (1, 0, 2)]:
        chunk = np.fromfile(s0 / str(c) / str(i) / str(j), dtype=np.uint8).reshape(1, 32, 32)
        assert np.array_equal(chunk[0], padded[c, i * 32 : (i + 1) * 32, j * 32 : (j + 1) * 32])
    s1 = mount.path / levels[1] / "chunks"
    assert {p for p in _tree(s1) if not p.endswith("/")} == {f"{c}/0/{j}" for c in range(2) for j in range(2)}
    edge = np.fromfile(s1 / "1" / "0" / "1", dtype=np.uint8).reshape(32, 32)
    assert np.array_equal(edge[:, :8], pyramid[1][1, :, 32:40]) and not edge[:, 8:].any()
    _assert_enoent(s0 / "0" / "0" / "3")
    _assert_enoent(s0 / "0.0.0")
    _assert_enoent(mount.path / "s9")
    assert json.loads(_xattrs(mount.path)["user.zarr.attributes"])["multiscales"] == multiscales
    assert _xattrs(mount.path / levels[2])["user.zarr.shape"] == "2,16,20"


# -- nested zarr-python groups with sharded arrays ------------------------------------------------

IMG_SHAPE = (40, 60)


def _img_reference() -> np.ndarray:
    ref = (np.arange(np.prod(IMG_SHAPE), dtype=np.uint32) * 37 % 60000).astype("<u2").reshape(IMG_SHAPE)
    ref[20:, 30:] = 7  # shard (1, 1) all fill value: not stored
    return ref


def _nested(store: Path) -> None:
    """/ {project} -> top (plain int64), a {level: 1} -> vec (sharded int16 stored big-endian;
    zarr-python ignores a ">i2" dtype's byte order: it takes a serializer), a/b -> img
    (sharded u2, fill 7, dims y,x), a/b/c (an empty group)."""
    root = zarr.create_group(store, zarr_format=3, attributes={"project": "zarrfs", "n": [1, 2]})
    top = root.create_array("top", shape=(7,), dtype="<i8", chunks=(3,))
    top[:] = np.arange(7) - 3
    a = root.create_group("a", attributes={"level": 1})
    vec = a.create_array("vec", shape=(50,), dtype="i2", chunks=(5,), shards=(20,),
                         serializer=BytesCodec(endian="big"), fill_value=-1, attributes={"kind": "vector"})
    vec[:] = np.arange(50, dtype="i2") * -3
    b = a.create_group("b", attributes={"level": 2})
    img = b.create_array("img", shape=IMG_SHAPE, dtype="<u2", chunks=(10, 10), shards=(20, 30),
                         fill_value=7, dimension_names=["y", "x"], attributes={"units": "counts"})
    img[:] = _img_reference()
    b.create_group("c")


NESTED_TREE = {
    "zarr.json", "top/", "top/zarr.json", "top/data", "top/chunks/", "top/chunks/c/",
    *(f"top/chunks/c/{i}" for i in range(3)),
    "a/", "a/zarr.json", "a/vec/", "a/vec/zarr.json", "a/vec/data", "a/vec/chunks/", "a/vec/chunks/c/",
    *(f"a/vec/chunks/c/{i}" for i in range(3)),
    "a/b/", "a/b/zarr.json", "a/b/c/", "a/b/c/zarr.json",
    "a/b/img/", "a/b/img/zarr.json", "a/b/img/data", "a/b/img/chunks/", "a/b/img/chunks/c/",
    "a/b/img/chunks/c/0/", "a/b/img/chunks/c/1/",
    *(f"a/b/img/chunks/c/{i}/{j}" for i in range(2) for j in range(2)),
}


@pytest.mark.fast
def test_nested_groups_with_sharded_arrays(tmp_path: Path, mount_array: Any) -> None:
    store = tmp_path / "tree.zarr"
    _nested(store)
    assert not (store / "a" / "b" / "img" / "c" / "1" / "1").exists()
    mount = mount_array(store, ["ro"])
    assert {p for p in _tree(mount.path) if Path(p).name not in VIEW_FILES} == NESTED_TREE
    assert _assert_metadata_files_as_stored(mount.path, store) == 7

    root = zarr.open_group(store, mode="r")
    for name in ("top", "a/vec", "a/b/img"):
        _assert_data(mount.path / name / "data", root[name][...])
    assert np.array_equal(root["a/b/img"][...], _img_reference())
    # Shard files: whole shards, in little-endian whatever the stored byte order.
    shard = np.fromfile(mount.path / "a/vec/chunks/c/2", dtype="<i2")
    assert shard.tolist() == [i * -3 for i in range(40, 50)] + [-1] * 10
    shard = np.fromfile(mount.path / "a/b/img/chunks/c/1/1", dtype="<u2").reshape(20, 30)
    assert (shard == 7).all()
    shard = np.fromfile(mount.path / "a/b/img/chunks/c/0/1", dtype="<u2").reshape(20, 30)
    assert np.array_equal(shard, _img_reference()[:20, 30:])

    for name in ("nosuch", "a/nosuch", "a/data", "a/chunks", "a/b/c/data", "a/b/img/nosuch",
                 "a/b/img/chunks/c/2/0", "a/b/img/chunks/c/0/2", "a/vec/chunks/c/3", ".zgroup",
                 "a/.zattrs", "a/b/img/.zarray"):
        _assert_enoent(mount.path / name)


@pytest.mark.fast
def test_write_through_a_nested_group_mount(tmp_path: Path, mount_array: Any) -> None:
    store = tmp_path / "tree.zarr"
    _nested(store)
    metadata = {p: (store / p).read_bytes() for p in _tree(store) if Path(p).name == "zarr.json"}
    assert len(metadata) == 7
    expected_img = _img_reference()
    expected_vec = np.arange(50, dtype="<i2") * -3
    mount = mount_array(store)
    with open(mount.path / "a/b/img/data", "r+b") as f:
        row = np.array([1000, 1001, 1002, 1003], dtype="<u2")
        f.seek((5 * 60 + 10) * 2)
        f.write(row.tobytes())
        expected_img[5, 10:14] = row
        f.seek((25 * 60 + 40) * 2)  # inside the unstored shard (1, 1)
        f.write(np.array([999], dtype="<u2").tobytes())
        expected_img[25, 40] = 999
    new_shard = np.arange(20, dtype="<i2") + 500
    with open(mount.path / "a/vec/chunks/c/1", "r+b") as f:
        f.write(new_shard.tobytes())
    expected_vec[20:40] = new_shard
    assert mount.unmount() == 0

    root = zarr.open_group(store, mode="r")
    assert np.array_equal(root["a/b/img"][...], expected_img)
    assert np.array_equal(root["a/vec"][...], expected_vec)
    assert {p: (store / p).read_bytes() for p in metadata} == metadata
    assert json.loads(metadata["a/vec/zarr.json"])["codecs"][0]["configuration"]["codecs"][0] == {
        "name": "bytes", "configuration": {"endian": "big"}}
    assert (store / "a/b/img/c/1/1").exists()
    assert np.array_equal(root["top"][...], np.arange(7) - 3)
    assert root.attrs.asdict() == {"project": "zarrfs", "n": [1, 2]}


def test_info_on_a_nested_group(tmp_path: Path) -> None:
    store = tmp_path / "tree.zarr"
    _nested(store)
    lines = _info_lines(store)
    assert set(lines) == {"/", "/top", "/a", "/a/vec", "/a/b", "/a/b/img", "/a/b/c"}
    for group in ("/", "/a", "/a/b", "/a/b/c"):
        assert "group" in lines[group] and "array" not in lines[group]
    for array in ("/top", "/a/vec", "/a/b/img"):
        assert "array" in lines[array]
    assert _contains_run(_numbers(lines["/a/b/img"]), [40, 60])
    assert _contains_run(_numbers(lines["/a/b/img"]), [20, 30])  # the shard shape
    assert 50 in _numbers(lines["/a/vec"]) and 7 in _numbers(lines["/top"])
    assert "3" in lines["/a/b/img"]  # the zarr format


# -- extended attributes ----------------------------------------------------------------------------

ARRAY_XATTRS = {"user.zarr.shape", "user.zarr.dtype", "user.zarr.chunks", "user.zarr.fill_value",
                "user.zarr.dimension_names", "user.zarr.attributes", "user.zarr.views"}


def test_extended_attributes(tmp_path: Path, mount_array: Any) -> None:
    store = tmp_path / "tree.zarr"
    _nested(store)
    mount = mount_array(store)
    img = mount.path / "a/b/img"
    for path in (img, img / "data"):
        attrs = _xattrs(path)
        assert set(attrs) == ARRAY_XATTRS | {"user.zarr.inner_chunks"}
        assert attrs["user.zarr.shape"] == "40,60"
        assert attrs["user.zarr.dtype"] == "<u2"
        assert attrs["user.zarr.chunks"] == "20,30"
        assert attrs["user.zarr.inner_chunks"] == "10,10"
        assert json.loads(attrs["user.zarr.fill_value"]) == 7
        assert json.loads(attrs["user.zarr.dimension_names"]) == ["y", "x"]
        assert json.loads(attrs["user.zarr.attributes"]) == {"units": "counts"}
    vec = _xattrs(mount.path / "a/vec")
    assert vec["user.zarr.dtype"] == "<i2"  # the flat view's byte order, not the stored >i2
    shape_chunks = (vec["user.zarr.shape"], vec["user.zarr.chunks"], vec["user.zarr.inner_chunks"])
    assert shape_chunks == ("50", "20", "5")
    assert json.loads(vec["user.zarr.fill_value"]) == -1
    top = _xattrs(mount.path / "top")
    assert set(top) == ARRAY_XATTRS
    assert json.loads(top["user.zarr.dimension_names"]) is None
    assert json.loads(top["user.zarr.attributes"]) == {}
    assert _xattrs(mount.path / "top/data") == top
    for group, attributes in (("", {"project": "zarrfs", "n": [1, 2]}), ("a", {"level": 1}),
                              ("a/b/c", {})):
        attrs = _xattrs(mount.path / group)
        assert set(attrs) == {"user.zarr.attributes", "user.zarr.views"}
        assert json.loads(attrs["user.zarr.attributes"]) == attributes
        assert "data.h5" in json.loads(attrs["user.zarr.views"])
    with pytest.raises(OSError) as missing:
        os.getxattr(img, "user.zarr.nosuch")
    assert missing.value.errno == errno.ENODATA

    for path in (img, img / "data", mount.path / "a", mount.path):
        for name in ("user.zarr.shape", "user.mine"):
            with pytest.raises(OSError) as refused:
                os.setxattr(path, name, b"1")
            assert refused.value.errno == errno.EPERM, (path, name)
    assert _xattrs(img)["user.zarr.shape"] == "40,60"

    if shutil.which("getfattr"):  # the attr package
        done = subprocess.run(["getfattr", "-d", "--absolute-names", str(img)],
                              capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        assert 'user.zarr.shape="40,60"' in done.stdout.splitlines()
        assert 'user.zarr.inner_chunks="10,10"' in done.stdout.splitlines()
        assert {line.split("=")[0] for line in done.stdout.splitlines() if line.startswith("user.")} == (
            ARRAY_XATTRS | {"user.zarr.inner_chunks"})
        done = subprocess.run(["getfattr", "-d", "--absolute-names", str(mount.path / "a")],
                              capture_output=True, text=True, timeout=30)
        assert 'user.zarr.attributes="{\\"level\\": 1}"' in done.stdout.splitlines() or (
            re.search(r'^user\.zarr\.attributes=".*level.*1.*"$', done.stdout, re.M)), done.stdout


def test_setting_an_xattr_on_a_read_only_mount_is_erofs(tmp_path: Path, mount_array: Any) -> None:
    store = tmp_path / "tree.zarr"
    _nested(store)
    mount = mount_array(store, ["ro"])
    for path in (mount.path / "a/b/img", mount.path / "a/b/img/data", mount.path / "a/b", mount.path):
        with pytest.raises(OSError) as refused:
            os.setxattr(path, "user.zarr.attributes", b"{}")
        assert refused.value.errno == errno.EROFS, path
    assert json.loads(os.getxattr(mount.path / "a/b", "user.zarr.attributes")) == {"level": 2}


# -- arrays of variable-length strings (data.txt, data.h5); arrays zarrfs cannot present ----------


@pytest.mark.parametrize("fmt", [2, 3], ids=["v2-vlen-utf8", "v3-string"])
def test_group_with_a_vlen_string_array(fmt: int, tmp_path: Path, mount_array: Any) -> None:
    store = tmp_path / "strings.zarr"
    root = zarr.create_group(store, zarr_format=fmt)
    names = root.create_array("names", shape=(3,), dtype=str, chunks=(2,))
    names[:] = np.array(["a", "bb", "ccc"])
    nums = root.create_array("nums", shape=(5,), dtype="<i4", chunks=(2,))
    nums[:] = np.arange(5) * 11
    meta = {".zarray", ".zattrs"} if fmt == 2 else {"zarr.json"}
    stored = json.loads((store / "names" / (".zarray" if fmt == 2 else "zarr.json")).read_bytes())
    assert stored.get("dtype", stored.get("data_type")) == ("|O" if fmt == 2 else "string")

    mount = mount_array(store, ["ro"])
    assert set(os.listdir(mount.path)) == ({".zgroup", ".zattrs"} if fmt == 2 else {"zarr.json"}) | {
        "data.nc", "data.h5", "names", "nums"}
    assert set(os.listdir(mount.path / "names")) == meta | {"data.txt", "data.h5"}
    assert (mount.path / "names" / "data.txt").read_bytes() == b"a\nbb\nccc\n"
    _assert_enoent(mount.path / "names" / "data")
    _assert_enoent(mount.path / "names" / "chunks")
    _assert_metadata_files_as_stored(mount.path, store)
    _log_line_naming(mount.log(), "names", "data.txt")
    _assert_data(mount.path / "nums" / "data", np.arange(5, dtype="<i4") * 11)
    assert without_views(os.listdir(mount.path / "nums")) == sorted(meta | {"data", "chunks"})

    lines = _info_lines(store)
    assert set(lines) == {"/", "/names", "/nums"}
    assert "data.txt and data.h5" in lines["/names"] and "string" in lines["/names"]
    assert "metadata only" not in lines["/nums"]

    direct = mount_array(store / "names", ["ro"])  # mounted alone: data.txt, data.h5 and its metadata
    assert set(os.listdir(direct.path)) == meta | {"data.txt", "data.h5"}


BAD_CODEC = "nosuchcodec"


def _group_with_a_bad_array(store: Path, kind: str) -> str:
    """A group with a good array `good` and a broken array `bad`; a word the problem's
    description must contain."""
    fmt = 3 if kind == "unknown-codec" else 2
    root = zarr.create_group(store, zarr_format=fmt, attributes={"ok": True})
    good = root.create_array("good", shape=(6,), dtype="<u2", chunks=(4,))
    good[:] = np.arange(6) + 100
    bad = root.create_array("bad", shape=(6,), dtype="<u2", chunks=(4,))
    bad[:] = np.arange(6)
    if kind == "unknown-codec":
        doc = json.loads((store / "bad" / "zarr.json").read_bytes())
        doc["codecs"] = [doc["codecs"][0], {"name": BAD_CODEC, "configuration": {}}]
        (store / "bad" / "zarr.json").write_text(json.dumps(doc, indent=2))
        return BAD_CODEC
    (store / "bad" / ".zarray").write_text('{"shape": [6], "chunks": [4], "dtype": "<u2"')
    return "json"


@pytest.mark.parametrize("kind", ["unknown-codec", "bad-json"])
def test_group_with_a_bad_array(kind: str, tmp_path: Path, mount_array: Any) -> None:
    store = tmp_path / "group.zarr"
    problem = _group_with_a_bad_array(store, kind)
    meta = {"zarr.json"} if kind == "unknown-codec" else {".zarray", ".zattrs"}

    mount = mount_array(store, ["ro"])
    assert set(os.listdir(mount.path / "bad")) == meta
    _assert_metadata_files_as_stored(mount.path, store)  # the broken bytes, as stored
    _assert_enoent(mount.path / "bad" / "data")
    _log_line_naming(mount.log(), "bad", problem)
    assert without_views(os.listdir(mount.path / "good")) == sorted(meta | {"data", "chunks"})
    _assert_data(mount.path / "good" / "data", np.arange(6, dtype="<u2") + 100)
    assert json.loads(_xattrs(mount.path)["user.zarr.attributes"]) == {"ok": True}

    done = _zarrfs("info", str(store / "bad"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert problem in (done.stdout + done.stderr).lower()
    reason = done.stderr.strip().removeprefix("zarrfs:").strip()

    line = _mount_fails(store / "bad", tmp_path / "direct")
    assert problem in line.lower()
    assert reason in line  # the same reason, unaltered

    lines = _info_lines(store)
    assert set(lines) == {"/", "/good", "/bad"}
    assert "metadata only" in lines["/bad"] and problem in lines["/bad"].lower()
    assert "metadata only" not in lines["/good"] and 6 in _numbers(lines["/good"])



def test_children_named_with_spaces_and_non_ascii(tmp_path: Path, mount_array: Any) -> None:
    store = tmp_path / "names.zarr"
    root = zarr.create_group(store, zarr_format=3)
    root.create_array("déjà vu", shape=(3,), dtype="<i1", chunks=(3,))[:] = [1, 2, 3]
    root.create_group("sub group").create_array("x-y.z", shape=(2,), dtype="<i1", chunks=(2,))[:] = [4, 5]
    mount = mount_array(store, ["ro"])
    assert set(os.listdir(mount.path)) == {"zarr.json", "data.nc", "data.h5", "déjà vu", "sub group"}
    assert set(os.listdir(mount.path / "sub group")) == {"zarr.json", "data.nc", "data.h5", "x-y.z"}
    _assert_data(mount.path / "déjà vu" / "data", np.array([1, 2, 3], "<i1"))
    _assert_data(mount.path / "sub group" / "x-y.z" / "data", np.array([4, 5], "<i1"))
    _assert_enoent(mount.path / "deja vu")
