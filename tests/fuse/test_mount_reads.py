"""The filesystem on a real FUSE mount, read with ordinary tools (ls, dd, cat, mmap, numpy):
the layout and names of an array directory, and what `data` and the chunk files hold."""

from __future__ import annotations

import json
import mmap
import os
import random
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers.fuse_arrays import DTYPE, SHAPE, make_array, reference_values, tensorstore_read
from tests.helpers.mounting import without_views

# -- layout and names -------------------------------------------------------------------------


def test_layout_lists_metadata_data_and_every_chunk(array_path: Path, mount_array: Any) -> None:
    mount = mount_array(array_path)
    assert without_views(os.listdir(mount.path)) == ["chunks", "data", "zarr.json"]
    assert json.loads((mount.path / "zarr.json").read_bytes()) == json.loads(
        (array_path / "zarr.json").read_bytes())
    assert mount.data.stat().st_size == np.prod(SHAPE) * 2
    listed = sorted(os.listdir(mount.path / "chunks" / "c"))
    assert listed == ["0", "1", "2"]
    assert sorted(os.listdir(mount.path / "chunks" / "c" / "2")) == ["0", "1"]
    assert (mount.chunk("c/2/1")).stat().st_size == 20 * 35 * 2


@pytest.mark.parametrize("name", ["c/3/0", "c/0/2", "c/0/0/0", "c/00/1", "c/-1/0", "x", "c/+1/0",
                                  "c/0/1x", "..", "c/../data"])
def test_names_outside_the_grid_do_not_exist(array_path: Path, mount_array: Any, name: str) -> None:
    mount = mount_array(array_path)
    path = mount.path / "chunks" / name
    if name in ("..", "c/../data"):
        # The kernel resolves "..": it must land back inside the mount, never outside.
        # (is_relative_to, not a string prefix, which a sibling such as "mnt2" would also match)
        assert Path(os.path.realpath(path)).is_relative_to(os.path.realpath(mount.path))
        return
    with pytest.raises((FileNotFoundError, NotADirectoryError)):
        path.stat()


def test_dot_separated_keys_are_flat_files(tmp_path: Path, mount_array: Any) -> None:
    path = tmp_path / "dots.zarr"
    make_array(path, shards=False, separator=".")
    mount = mount_array(path)
    assert sorted(os.listdir(mount.path / "chunks")) == [
        f"c.{i}.{j}" for i in range(3) for j in range(2)]
    assert mount.chunk("c.1.1").stat().st_size == 20 * 35 * 2


# -- reads ------------------------------------------------------------------------------------


def test_whole_file_random_preads_and_mmap_match_tensorstore(array_path: Path, mount_array: Any) -> None:
    expected = tensorstore_read(array_path).tobytes()
    mount = mount_array(array_path)
    assert mount.data.read_bytes() == expected
    rng = random.Random(1)
    fd = os.open(mount.data, os.O_RDONLY)
    try:
        for _ in range(300):
            offset = rng.randrange(len(expected))
            size = rng.randrange(1, 9000)
            assert os.pread(fd, size, offset) == expected[offset : offset + size]
        assert os.pread(fd, 100, len(expected)) == b""
        with mmap.mmap(fd, 0, prot=mmap.PROT_READ) as mapped:
            assert mapped[:] == expected
    finally:
        os.close(fd)
    memmap = np.memmap(mount.data, dtype=DTYPE, mode="r", shape=SHAPE)
    assert np.array_equal(memmap, reference_values())


@pytest.mark.fast
def test_chunk_files_hold_the_decoded_chunk(array_path: Path, mount_array: Any) -> None:
    mount = mount_array(array_path)
    reference = reference_values()
    for i in range(3):
        for j in range(2):
            chunk = np.fromfile(mount.chunk(f"c/{i}/{j}"), dtype=DTYPE).reshape(20, 35)
            assert np.array_equal(chunk, reference[i * 20 : (i + 1) * 20, j * 35 : (j + 1) * 35])


@pytest.mark.fast
def test_dd_reads_bytes(array_path: Path, mount_array: Any) -> None:
    mount = mount_array(array_path)
    result = subprocess.run(["dd", f"if={mount.data}", "bs=1000", "skip=3", "count=2", "status=none"],
                            capture_output=True, check=True)
    assert result.stdout == reference_values().tobytes()[3000:5000]


def test_big_endian_view(array_path: Path, mount_array: Any) -> None:
    mount = mount_array(array_path, ["endian=big"])
    assert np.array_equal(np.fromfile(mount.data, dtype=">u2").reshape(SHAPE), reference_values())
    with open(mount.data, "r+b") as f:
        f.seek(2 * 5)
        f.write(np.array([0x1234], dtype=">u2").tobytes())
    mount.unmount()
    assert tensorstore_read(array_path)[0, 5] == 0x1234
