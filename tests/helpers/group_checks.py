"""What the group tests (tests/tree/test_groups_*.py) share: `zarrfs` run as a command, the
tree and files of a mount checked against the store, extended attributes, `zarrfs info`'s
lines and a mount that must fail.

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
import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
import zarr
from zarr.codecs import BytesCodec

from tests.helpers.mounting import ZARRFS

METADATA_NAMES = {"zarr.json", ".zgroup", ".zattrs", ".zarray", ".zmetadata"}


# -- helpers ------------------------------------------------------------------------------------


def zarrfs(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ZARRFS, *args], capture_output=True, text=True, timeout=60)


def tree(root: Path) -> set[str]:
    """Every path under `root`, relative; directories end in '/'."""
    found = set()
    for directory, dirs, files in os.walk(root):
        rel = Path(directory).relative_to(root)
        found.update(f"{rel / d}/".removeprefix("./") for d in dirs)
        found.update(str(rel / f).removeprefix("./") for f in files)
    return found


def assert_data(path: Path, expected: np.ndarray) -> None:
    """`path` holds `expected` flat, C order, little-endian."""
    dtype = expected.dtype.newbyteorder("<")
    assert path.stat().st_size == expected.size * expected.dtype.itemsize
    got = np.fromfile(path, dtype=dtype).reshape(expected.shape)
    assert np.array_equal(got, expected.astype(dtype), equal_nan=expected.dtype.kind in "fc")


def assert_metadata_files_as_stored(mount_root: Path, store_root: Path) -> int:
    """Every metadata file in the mount has the stored bytes, and every stored metadata file
    of a node shows in the mount; how many were compared."""
    mounted_files = {p for p in tree(mount_root) if Path(p).name in METADATA_NAMES}
    stored_files = {p for p in tree(store_root) if Path(p).name in METADATA_NAMES}
    assert mounted_files == stored_files
    for rel in mounted_files:
        assert (mount_root / rel).read_bytes() == (store_root / rel).read_bytes(), rel
    return len(mounted_files)


def assert_enoent(path: Path) -> None:
    with pytest.raises(OSError) as raised:
        os.stat(path)
    assert raised.value.errno == errno.ENOENT, (path, raised.value)


def xattrs(path: Path) -> dict[str, str]:
    """The user.zarr.* extended attributes of `path`, by name."""
    names = [n for n in os.listxattr(path) if n.startswith("user.zarr.")]
    return {n: os.getxattr(path, n).decode() for n in names}


def numbers(text: str) -> list[int]:
    return [int(n) for n in re.findall(r"\d+", text)]


def contains_run(haystack: list[int], needle: list[int]) -> bool:
    return any(haystack[i : i + len(needle)] == needle for i in range(len(haystack)))


def info_lines(source: Path) -> dict[str, str]:
    """`zarrfs info GROUP` as {node path: its line}; each node exactly once."""
    done = zarrfs("info", str(source))
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    lines: dict[str, str] = {}
    for line in done.stdout.splitlines():
        match = re.match(r"\s*(/\S*?):?(\s|$)", line)
        if match and not Path(match.group(1)).is_relative_to(source):  # a header naming the source
            assert match.group(1) not in lines, f"{match.group(1)} listed twice:\n{done.stdout}"
            lines[match.group(1)] = line
    return lines


# -- nested zarr-python groups with sharded arrays ------------------------------------------------

IMG_SHAPE = (40, 60)


def img_reference() -> np.ndarray:
    ref = (np.arange(np.prod(IMG_SHAPE), dtype=np.uint32) * 37 % 60000).astype("<u2").reshape(IMG_SHAPE)
    ref[20:, 30:] = 7  # shard (1, 1) all fill value: not stored
    return ref


def nested(store: Path) -> None:
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
    img[:] = img_reference()
    b.create_group("c")
