"""`zarrfs stats MOUNTPOINT` and the offline `zarrfs resize SOURCE --shape S`."""

from __future__ import annotations

import json
import os
import subprocess
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import tensorstore as ts
import zarr

from tests.helpers.mounting import ZARRFS


def zarrfs(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ZARRFS, *args], capture_output=True, text=True, timeout=60)


def test_stats_counters_move_with_reads_and_writes(tmp_path: Path, mount_array: Any) -> None:
    path = tmp_path / "a.zarr"
    zarr.create_array(str(path), shape=(64, 64), chunks=(16, 16), dtype="<u2")[...] = 5
    mount = mount_array(path)
    before = json.loads(zarrfs("stats", str(mount.path), "--json").stdout)
    keys = {"requests", "cache_hits", "cache_misses", "bytes_fetched", "bytes_stored", "chunks_decoded",
            "chunks_encoded", "errors", "decode_seconds"}
    assert keys <= set(before) and all(isinstance(before[k], int | float) for k in keys)
    assert mount.data.read_bytes() == np.full((64, 64), 5, "<u2").tobytes()
    with open(mount.data, "r+b") as f:
        f.write(np.full(16 * 64, 9, "<u2").tobytes())
    after = json.loads(zarrfs("stats", str(mount.path), "--json").stdout)
    assert after["requests"] > before["requests"]
    assert after["chunks_decoded"] >= 16 and after["bytes_fetched"] > 0
    assert after["chunks_encoded"] == 4 and after["bytes_stored"] > 0  # the first chunk row
    assert after["errors"] == 0 and after["decode_seconds"] > 0
    # What the cache holds: the chunks read and written (stored by the close: none dirty).
    assert 0 < after["cache_bytes"] <= after["cache_limit"]
    assert after["dirty_bytes"] == 0 and after["readahead_bytes"] == 0
    text = zarrfs("stats", str(mount.path))
    assert text.returncode == 0 and "cache_misses:" in text.stdout


def test_stats_of_a_directory_that_is_no_mount_fails_in_one_line(tmp_path: Path) -> None:
    result = zarrfs("stats", str(tmp_path))
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "not a zarrfs mount" in result.stderr


def test_offline_resize_shrinks_and_grows_with_fill(tmp_path: Path) -> None:
    path = tmp_path / "a.zarr"
    values = np.arange(1, 101, dtype="<i4").reshape(10, 10)
    zarr.create_array(str(path), shape=(10, 10), chunks=(4, 4), dtype="<i4", fill_value=-1)[...] = values
    assert zarrfs("resize", str(path), "--shape", "5,7").returncode == 0
    assert np.array_equal(zarr.open_array(str(path))[...], values[:5, :7])
    keys = sorted(str(p.relative_to(path)) for p in path.rglob("*") if p.is_file())
    assert keys == ["c/0/0", "c/0/1", "c/1/0", "c/1/1", "zarr.json"]  # chunks past the new edge gone
    assert zarrfs("resize", str(path), "--shape", "12,12").returncode == 0
    expected = np.full((12, 12), -1, "<i4")
    expected[:5, :7] = values[:5, :7]
    read = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path)}}).result()
    assert np.array_equal(read.read().result(), expected)  # never old data where it was cut


def test_offline_resize_updates_consolidated_metadata(tmp_path: Path) -> None:
    root = tmp_path / "g.zarr"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        group = zarr.open_group(str(root), mode="w", zarr_format=2)
        group.create_array("x", shape=(8, 8), chunks=(4, 4), dtype="u1")[...] = 1
        zarr.consolidate_metadata(str(root))
        result = zarrfs("resize", str(root / "x"), "--shape", "3,8")
        assert result.returncode == 0, result.stderr
        assert str(root) in result.stdout
        assert zarr.open_group(str(root), mode="r")["x"].shape == (3, 8)
    consolidated = json.loads((root / ".zmetadata").read_text())
    assert consolidated["metadata"]["x/.zarray"]["shape"] == [3, 8]


def test_offline_resize_refuses_rank_0_and_wrong_ranks(tmp_path: Path) -> None:
    scalar = tmp_path / "s.zarr"
    zarr.create_array(str(scalar), shape=(), dtype="f4")
    vector = tmp_path / "v.zarr"
    zarr.create_array(str(vector), shape=(4,), chunks=(2,), dtype="f4")
    for source, shape in ((scalar, "1"), (vector, "2,2")):
        result = zarrfs("resize", str(source), "--shape", shape)
        assert result.returncode == 1 and "Traceback" not in result.stderr
        assert "rank" in result.stderr


def test_offline_resize_refuses_an_array_a_mount_serves(tmp_path: Path, mount_array: Any) -> None:
    root = tmp_path / "g.zarr"
    group = zarr.open_group(str(root), mode="w")
    group.create_array("x", shape=(4, 4), chunks=(2, 2), dtype="<i2", fill_value=0)[...] = 3
    mount = mount_array(root)
    elsewhere = tmp_path / "link"
    elsewhere.symlink_to(root)
    spellings = (root / "x", root, f"file://{root}/x", elsewhere / "x", os.path.relpath(root / "x"))
    for source in spellings:  # below the mounted group, the mounted node itself, other spellings
        result = zarrfs("resize", str(source), "--shape", "2,2")
        assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr
        assert f"mounted at {mount.path}" in result.stderr and "unmount it first" in result.stderr
    assert zarr.open_array(str(root / "x")).shape == (4, 4)  # untouched
    forced = zarrfs("resize", str(root / "x"), "--shape", "4,6", "--force")
    assert forced.returncode == 0, forced.stderr
    assert zarr.open_array(str(root / "x")).shape == (4, 6)
    zarrfs("resize", str(root / "x"), "--shape", "4,4", "--force")
    assert (mount.path / "x" / "data").stat().st_size == 4 * 4 * 2
    other = tmp_path / "g.zarr2"  # a sibling whose name begins like the mounted one
    zarr.create_array(str(other), shape=(4,), chunks=(2,), dtype="<i2")
    assert zarrfs("resize", str(other), "--shape", "2").returncode == 0
