"""Zipped Zarr as people make it, for the zip tests: zarr-python's `ZipStore` (the store at
the zip's root), a directory store zipped by a tool (the BioImage Archive's layout: the store
in one folder of the zip, entries deflated), and an RFC-9-like `.ozx` (OME-Zarr 0.5 at the
root, `zarr.json` entries first in the central directory, entries stored, ZIP64, the
comment naming the version). Each is read back by zarr-python as the oracle (`open_zipped`).
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import tifffile
import zarr
from zarr.storage import ZipStore

OZX_COMMENT = b'{"ome":{"version":"0.5"}}'


def values(shape: tuple[int, ...], dtype: str, seed: int = 0) -> np.ndarray:
    """Values that differ chunk to chunk (a misplaced chunk shows)."""
    flat = np.arange(int(np.prod(shape)), dtype="int64") * 7 + seed
    return flat.reshape(shape).astype(dtype)


def fill(group: zarr.Group, zarr_format: int) -> None:
    """Two arrays in `group`: an integer image and a float volume (sharded in v3)."""
    image = group.create_array("image", shape=(70, 90), chunks=(32, 32), dtype="uint16")
    image[:] = values((70, 90), "uint16")
    shards = {"shards": (8, 16, 16)} if zarr_format == 3 else {}
    volume = group.create_array("volume", shape=(8, 20, 30), chunks=(4, 8, 8), dtype="<f4", **shards)
    volume[:] = values((8, 20, 30), "float32", seed=3) / 4


def zipstore_group(path: Path, zarr_format: int) -> Path:
    """A group with two arrays, written into a zip by zarr-python's ZipStore."""
    store = ZipStore(path, mode="w")
    fill(zarr.open_group(store, mode="w", zarr_format=zarr_format), zarr_format)  # type: ignore[arg-type]
    store.close()
    return path


def zipstore_array(path: Path, zarr_format: int = 3) -> Path:
    """One array at the zip's root, written by ZipStore with its chunks deflated."""
    store = ZipStore(path, mode="w", compression=zipfile.ZIP_DEFLATED)
    array = zarr.create_array(store, shape=(100, 60), chunks=(32, 32), dtype="int32",
                              zarr_format=zarr_format)  # type: ignore[arg-type]
    array[:] = values((100, 60), "int32")
    store.close()
    return path


def ome_image(directory: Path) -> Path:
    """An OME-Zarr 0.5 image (two levels) as a directory store."""
    group = zarr.open_group(directory, mode="w", zarr_format=3)
    datasets = [{"path": str(level), "coordinateTransformations": [
        {"type": "scale", "scale": [1.0, 2.0**level, 2.0**level]}]} for level in (0, 1)]
    group.attrs["ome"] = {"version": "0.5", "multiscales": [{
        "axes": [{"name": "c", "type": "channel"}, {"name": "y", "type": "space"},
                 {"name": "x", "type": "space"}], "datasets": datasets}]}
    for level, shape in enumerate([(2, 64, 48), (2, 32, 24)]):
        array = group.create_array(str(level), shape=shape, chunks=(1, 16, 16), dtype="uint8")
        array[:] = values(shape, "uint8", seed=level)
    return directory


def zipped_folder(directory: Path, path: Path, tool: str) -> Path:
    """`directory` zipped as one folder of the zip, entries deflated, by `zip -r` (Info-ZIP)
    or `python -m zipfile -c`."""
    if tool == "zip":
        command = ["zip", "-q", "-r", "-9", str(path), directory.name]
    else:
        command = [sys.executable, "-m", "zipfile", "-c", str(path), directory.name]
    subprocess.run(command, cwd=directory.parent, check=True)
    return path


def ozx(directory: Path, path: Path) -> Path:
    """`directory` (an OME-Zarr 0.5 store) as an RFC-9 `.ozx`: the store at the root, the
    `zarr.json` entries first (shallowest first), entries stored, ZIP64 records, the comment
    naming the OME-Zarr version."""
    files = sorted(p.relative_to(directory).as_posix() for p in directory.rglob("*") if p.is_file())
    first = sorted((f for f in files if f.rsplit("/", 1)[-1] == "zarr.json"), key=lambda f: (f.count("/"), f))
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name in first + [f for f in files if f not in first]:
            info = zipfile.ZipInfo(name, date_time=(2025, 1, 1, 0, 0, 0))
            with archive.open(info, "w", force_zip64=True) as entry:
                entry.write((directory / name).read_bytes())
        archive.comment = OZX_COMMENT
    return with_zip64_end(path)


def with_zip64_end(path: Path) -> Path:
    """`path` with ZIP64 end records (zipfile writes them only when the counts or offsets
    need them; RFC 9 archives have them): the ZIP64 end of central directory and its
    locator before the end record, whose counts and offsets then say "see ZIP64"."""
    raw = path.read_bytes()
    end = raw.rfind(b"PK\x05\x06")
    _, _, _, _, count, cd_size, cd_offset, comment_length = struct.unpack_from("<4s4H2LH", raw, end)
    record = struct.pack("<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, count, count, cd_size, cd_offset)
    locator = struct.pack("<4sLQL", b"PK\x06\x07", 0, end, 1)
    tail = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF,
                       comment_length)
    path.write_bytes(raw[:end] + record + locator + tail + raw[end + 22 :])
    return path


def open_zipped(path: Path, folder: str | None = None) -> Any:
    """What zarr-python reads from the zip (the oracle): the node at its root or in `folder`."""
    store = ZipStore(path, mode="r")
    return zarr.open(store, mode="r", path=folder or "")


def entries(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name) for name in archive.namelist() if not name.endswith("/")}


def file_names(directory: Path) -> set[str]:
    return {os.path.relpath(os.path.join(top, name), directory)
            for top, _, names in os.walk(directory) for name in names}


def assert_array_matches(directory: Path, array: Any) -> None:
    """The array directory's files hold what zarr-python reads from the zip, every view
    opens and reads whole."""
    expected = array[...]
    little = expected.dtype.newbyteorder("<")
    # (read_bytes lets go of the GIL while FUSE waits, np.fromfile does not: a server in
    # this process, answering the mount's requests, would wait for it)
    flat = np.frombuffer((directory / "data").read_bytes(), dtype=little)
    assert np.array_equal(flat.reshape(expected.shape), expected)
    assert np.array_equal(np.load(directory / "data.npy"), expected)
    assert np.array_equal(tifffile.imread(directory / "data.tif").reshape(expected.shape), expected)
    for name in ("data.raw.nhdr", "data.mhd", "data.vrt", "data.tif"):
        content = (directory / name).read_bytes()
        assert content and len(content) == os.path.getsize(directory / name)
    if array.shards is None:  # (the first chunk file holds the first chunk, decoded)
        first = ("c/" + "/".join("0" * array.ndim)) if array.metadata.zarr_format == 3 \
            else ".".join("0" * array.ndim)
        region = tuple(slice(0, c) for c in array.chunks)
        decoded = np.frombuffer((directory / "chunks" / first).read_bytes(), dtype=little)
        assert np.array_equal(decoded.reshape(array.chunks), expected[region])


def assert_group_matches(directory: Path, group: Any) -> None:
    arrays = dict(group.arrays())
    assert arrays and {p.name for p in directory.iterdir() if p.is_dir()} == set(arrays)
    for name, array in arrays.items():
        assert_array_matches(directory / name, array)
    assert (directory / "data.nc").read_bytes()[:3] == b"CDF"
