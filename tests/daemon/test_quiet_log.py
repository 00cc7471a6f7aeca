"""ERROR means an error: the ordinary workloads (reads, chunk files, writes, resizes and
shrinks, the workspace's edits, a remount) leave no ERROR line and no traceback in the
daemon's log. An operator reading one thinks the mount is broken; none of these injects a
fault, so none may explain one."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import zarr

from tests.helpers.mounting import Mount, MountFactory

SHAPE = (20, 20)
CHUNKS = (2, 2)  # a 10x10 grid of chunks


def _alarms(log: str) -> list[str]:
    return [line for line in log.splitlines() if "ERROR" in line or "Traceback" in line]


def _quiet(mount: Mount) -> None:
    alarms = _alarms(mount.log())
    assert not alarms, "\n".join(alarms[:20]) + f"\n({len(alarms)} lines)"


@pytest.mark.parametrize("shards", [None, (4, 4)], ids=["chunks", "shards"])
def test_reads_writes_and_shrinks_log_no_error(tmp_path: Path, mount_array: MountFactory,
                                               shards: tuple[int, int] | None) -> None:
    path = tmp_path / "a.zarr"
    values = np.arange(400, dtype="<i4").reshape(SHAPE)
    array = zarr.create_array(path, shape=SHAPE, dtype="<i4", chunks=CHUNKS, shards=shards, fill_value=-1)
    array[...] = values
    mount = mount_array(path, ["rw"])
    assert np.array_equal(np.fromfile(mount.data, dtype="<i4").reshape(SHAPE), values)
    chunk_dir = mount.path / "chunks" / "c"
    names = sorted(str(p.relative_to(mount.path / "chunks")) for p in chunk_dir.rglob("*") if p.is_file())
    assert names and all((mount.path / "chunks" / n).stat().st_size > 0 for n in names)
    with open(mount.data, "r+b") as f:  # a write across chunks, flushed by the close
        f.seek(3 * 80 + 8)
        f.write(np.full(30, 5, dtype="<i4").tobytes())
    os.truncate(mount.data, 7 * 80)  # a shrink that cuts chunks and drops others
    os.truncate(mount.data, 12 * 80)  # grown again: the fill value
    subprocess.run(["truncate", "-s", "0", str(mount.data)], check=True)  # every chunk file goes
    assert os.listdir(chunk_dir) == []
    with open(mount.data, "ab") as f:
        f.write(values[:4].tobytes())
    assert np.array_equal(np.fromfile(mount.data, dtype="<i4").reshape(4, 20), values[:4])
    assert mount.unmount() == 0
    again = mount_array(path, ["rw"])  # a remount reads what was stored
    assert np.array_equal(np.fromfile(again.data, dtype="<i4").reshape(4, 20), values[:4])
    assert again.unmount() == 0
    _quiet(mount)
    _quiet(again)


def test_workspace_edits_log_no_error(tmp_path: Path, mount_array: MountFactory) -> None:
    path = tmp_path / "g.zarr"
    group = zarr.open_group(path, mode="w", zarr_format=3)
    group.create_array("a", shape=SHAPE, dtype="<i4", chunks=CHUNKS)[...] = 3
    mount = mount_array(path, ["rw"])
    source = tmp_path / "x.npy"
    np.save(source, np.arange(60, dtype="<f4").reshape(6, 10))
    (mount.path / "g").mkdir()
    (mount.path / "g" / "h").mkdir()
    subprocess.run(["cp", str(source), str(mount.path / "g")], check=True)
    np.save(mount.path / "g" / "y.npy", np.ones((3, 3)))
    assert {"h", "x", "y"} <= set(os.listdir(mount.path / "g"))
    chunk_files = [p for p in (mount.path / "a" / "chunks" / "c").rglob("*") if p.is_file()]
    assert len(chunk_files) == 100  # (each looked up: the kernel knows them)
    os.rename(mount.path / "g" / "x", mount.path / "g" / "h" / "x")
    os.rename(mount.path / "a", mount.path / "g" / "a")
    assert np.array_equal(np.load(mount.path / "g" / "h" / "x" / "data.npy"), np.load(source))
    os.truncate(mount.path / "g" / "a" / "data", 0)
    shutil.rmtree(mount.path / "g" / "h")
    listed = set(os.listdir(mount.path / "g"))
    assert {"a", "y"} <= listed and "h" not in listed
    assert mount.unmount() == 0
    again = mount_array(path, ["rw"])
    assert {"a", "y"} <= set(os.listdir(again.path / "g"))
    assert np.array_equal(np.load(again.path / "g" / "y" / "data.npy"), np.ones((3, 3)))
    assert again.unmount() == 0
    _quiet(mount)
    _quiet(again)
