"""The daemon of a real FUSE mount: a background mount returns when ready and exits after the
unmount, SIGTERM loses no dirty data, a bad source, mountpoint or option fails clearly, and a
corrupt chunk is EIO for its region only."""

from __future__ import annotations

import errno
import json
import mmap
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tensorstore as ts

from tests.helpers.fuse_arrays import DTYPE, make_array, reference_values, tensorstore_read
from tests.helpers.mounting import ZARRFS, is_mounted, mounted

# -- the daemon -------------------------------------------------------------------------------


def test_background_mount_returns_when_ready_and_exits_after_unmount(
    array_path: Path, tmp_path: Path
) -> None:
    mountpoint = tmp_path / "bg"
    mountpoint.mkdir()
    result = subprocess.run([ZARRFS, "mount", str(array_path), str(mountpoint)],
                            capture_output=True, text=True, timeout=30)
    try:
        assert result.returncode == 0, result.stderr
        assert (mountpoint / "data").read_bytes() == reference_values().tobytes()
        with open(mountpoint / "data", "r+b") as f:
            f.write(b"\x09\x00")
    finally:
        subprocess.run(["fusermount3", "-u", str(mountpoint)], check=True)
    assert tensorstore_read(array_path)[0, 0] == 9


def test_sigterm_with_dirty_data_loses_nothing(array_path: Path, tmp_path: Path) -> None:
    with mounted(array_path, tmp_path / "m") as mount:
        fd = os.open(mount.data, os.O_RDWR)
        with mmap.mmap(fd, 0) as mapped:
            mapped[:4] = b"\x0a\x00\x0b\x00"
        os.close(fd)  # no fsync: the pages reach the daemon on munmap/close, then SIGTERM
        assert mount.stop(signal.SIGTERM) == 0
        assert not is_mounted(mount.path)
    assert tensorstore_read(array_path).reshape(-1)[:2].tolist() == [10, 11]


@pytest.mark.parametrize("source, message", [
    ("/nonexistent/array.zarr", "zarr.json: not found"),
    ("bad-json", "zarr.json: not valid JSON"),
    ("bad-codec", "unknown codec 'lzma'"),
])
def test_a_bad_source_fails_the_mount_with_one_clear_line(tmp_path: Path, source: str, message: str) -> None:
    if source == "bad-json":
        (tmp_path / source).mkdir()
        (tmp_path / source / "zarr.json").write_text("{not json")
        source = str(tmp_path / source)
    elif source == "bad-codec":
        make_array(tmp_path / source, shards=False)
        doc = json.loads((tmp_path / source / "zarr.json").read_text())
        doc["codecs"].append({"name": "lzma"})
        (tmp_path / source / "zarr.json").write_text(json.dumps(doc))
        source = str(tmp_path / source)
    mountpoint = tmp_path / "mp"
    mountpoint.mkdir()
    result = subprocess.run([ZARRFS, "mount", source, str(mountpoint)], capture_output=True,
                            text=True, timeout=30)
    assert result.returncode != 0
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert not is_mounted(mountpoint)


def test_bad_mountpoint_and_option_fail_clearly(array_path: Path, tmp_path: Path) -> None:
    missing = subprocess.run([ZARRFS, "mount", str(array_path), str(tmp_path / "nope")],
                             capture_output=True, text=True, timeout=30)
    assert missing.returncode != 0 and "does not exist" in missing.stderr
    (tmp_path / "mp").mkdir()
    bad = subprocess.run([ZARRFS, "mount", str(array_path), str(tmp_path / "mp"), "-o", "cache=lots"],
                         capture_output=True, text=True, timeout=30)
    assert bad.returncode != 0 and "cache" in bad.stderr and "Traceback" not in bad.stderr
    secret = subprocess.run([ZARRFS, "mount", str(array_path), str(tmp_path / "mp"), "-o", "secret=x"],
                            capture_output=True, text=True, timeout=30)
    assert secret.returncode != 0 and "environment" in secret.stderr


def test_a_corrupt_chunk_is_eio_for_its_region_only(tmp_path: Path, mount_array: Any) -> None:
    # Rows of one 4 KiB page each, so the kernel's page granularity cannot blur the regions.
    path = tmp_path / "rows.zarr"
    subprocess.run([ZARRFS, "create", str(path), "--shape", "200,2048", "--dtype", "uint16",
                    "--chunks", "20,2048", "--codec", "zstd:1"], check=True)
    reference = np.arange(200 * 2048, dtype=np.uint32).astype(DTYPE).reshape(200, 2048)
    spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path)}}
    ts.open(spec).result().write(reference).result()
    (path / "c" / "1" / "0").write_bytes(b"garbage" * 10)
    mount = mount_array(path)
    row = 2048 * 2
    fd = os.open(mount.data, os.O_RDONLY)
    try:
        with pytest.raises(OSError) as bad:
            os.pread(fd, row, 25 * row)  # row 25 lies in chunk (1, 0)
        assert bad.value.errno == errno.EIO
        assert os.pread(fd, row, 0) == reference[0].tobytes()
        assert os.pread(fd, row, 100 * row) == reference[100].tobytes()
        assert os.pread(fd, 2 * row, 18 * row) == reference[18:20].tobytes()
    finally:
        os.close(fd)
    assert "'c/1/0'" in mount.log()
