"""A real mount over the fault-injecting filesystem.

The daemon, started as a separate process through the faulty_fs launcher, reads its rules from
the file named in ZARRFS_FAULTY_CONFIG. Mounted with direct_io (so reads reach the daemon
exactly as made, without readahead), a chunk the store refuses reads as EIO, the rest of the
file still reads, and once the fault is gone (the rules file rewritten while the daemon runs)
the whole file reads."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from fsspec.implementations.local import LocalFileSystem

from tests.helpers.faulty_fs import CONFIG_ENV, child_env, read_counters, write_config
from zarrfs.array_metadata import create_array
from zarrfs.formats.v3 import parse_metadata
from zarrfs.grid import Box
from zarrfs.store import Store

REPO = Path(__file__).resolve().parents[2]
DOC = {
    "zarr_format": 3,
    "node_type": "array",
    "shape": [16, 16],
    "data_type": "int32",
    "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [8, 8]}},
    "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
    "fill_value": 0,
    "attributes": {},
    "codecs": [
        {"name": "bytes", "configuration": {"endian": "little"}},
        {"name": "zstd", "configuration": {"level": 1}},
    ],
}
VALUES = np.arange(256, dtype=np.int32).reshape(16, 16) + 1

pytestmark = pytest.mark.skipif(
    not os.path.exists("/dev/fuse") or shutil.which("fusermount3") is None,
    reason="needs FUSE (/dev/fuse and fusermount3)",
)


@pytest.fixture
def mounted(tmp_path: Path) -> Iterator[tuple[Path, Path, Path]]:
    """(mountpoint, rules file, counters file) of a daemon serving a 16x16 int32 array."""
    pytest.importorskip("pyfuse3")
    root, mountpoint = tmp_path / "array", tmp_path / "mnt"
    root.mkdir()
    mountpoint.mkdir()
    array = create_array(Store(LocalFileSystem(), str(root)), parse_metadata(json.dumps(DOC)))
    array.write(Box((0, 0), (16, 16)), VALUES)
    array.flush()
    array.close()
    config, counters = tmp_path / "faults.json", tmp_path / "counters.json"
    write_config(
        str(config),
        [
            {
                "name": "refuse-c11",
                "methods": ["cat_file"],
                "pattern": "*/c/1/1",
                "exception": "PermissionError",
                "errno": "EACCES",
            }
        ],
        target_protocol="file",
        counters_file=str(counters),
    )
    command = [
        sys.executable,
        "-m",
        "tests.helpers.faulty_fs",
        "zarrfs.cli",
        "mount",
        f"faulty://{root}",
        str(mountpoint),
        "-f",
        "-o",
        "ro,direct_io",
    ]
    daemon = subprocess.Popen(
        command,
        cwd=REPO,
        env=child_env(**{CONFIG_ENV: str(config)}),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 20
        while not os.path.ismount(mountpoint):
            if daemon.poll() is not None:
                pytest.fail(f"the daemon exited ({daemon.returncode}): {daemon.stdout.read()}")  # type: ignore[union-attr]
            if time.monotonic() > deadline:
                pytest.fail("the mount did not appear within 20 s")
            time.sleep(0.05)
        yield mountpoint, config, counters
    finally:
        if os.path.ismount(mountpoint):
            subprocess.run(["fusermount3", "-u", str(mountpoint)], check=False)
        try:
            daemon.wait(timeout=20)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()
        if os.path.ismount(mountpoint):
            subprocess.run(["fusermount3", "-uz", str(mountpoint)], check=False)


def read_rows(path: Path, first: int, last: int) -> np.ndarray:
    """Rows [first, last) of the mounted array, read from its flat `data` file."""
    row = 16 * 4
    with open(path / "data", "rb", buffering=0) as f:
        f.seek(first * row)
        raw = f.read((last - first) * row)
    return np.frombuffer(raw, dtype="<i4").reshape(last - first, 16)


def test_refused_chunk_fails_with_the_stores_errno_and_the_rest_reads(
        mounted: tuple[Path, Path, Path]) -> None:
    # The store refuses one chunk with EACCES: the reader is told so (not EIO).
    mountpoint, config, counters = mounted
    assert np.array_equal(read_rows(mountpoint, 0, 8), VALUES[:8])
    with pytest.raises(OSError) as caught:
        read_rows(mountpoint, 8, 16)
    assert caught.value.errno == errno.EACCES
    with pytest.raises(OSError) as caught_chunk:
        (mountpoint / "chunks" / "c" / "1" / "1").read_bytes()
    assert caught_chunk.value.errno == errno.EACCES
    assert read_counters(str(counters))["faults"].get("refuse-c11", 0) >= 1
    # The chunk file of a healthy chunk reads.
    chunk = np.frombuffer((mountpoint / "chunks" / "c" / "0" / "1").read_bytes(), dtype="<i4")
    assert np.array_equal(chunk.reshape(8, 8), VALUES[:8, 8:])

    write_config(str(config), [], target_protocol="file", counters_file=str(counters))
    with contextlib.suppress(OSError):  # the kernel may retry a page it failed before
        read_rows(mountpoint, 8, 16)
    assert np.array_equal(read_rows(mountpoint, 8, 16), VALUES[8:])
