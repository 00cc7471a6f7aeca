"""Only regular files are chunks and metadata: a FIFO, a socket or a device node where a chunk
or a metadata document should be is refused at once (EIO, a log line), never waited on, and
the unmount that follows returns. (A FIFO's open waited for a writer for ever, `-o timeout=`
or not: a local store's operations are not bounded, and the daemon never exited.)"""

from __future__ import annotations

import errno
import os
import socket
import stat
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import zarr

from tests.helpers.mounting import mounted
from tests.helpers.trust_helpers import READ_SECONDS, public, raw_array, read_as

__all__ = ["public"]  # (the fixture, used by name)

VALUES = np.arange(1, 13, dtype="u1")
UNMOUNT_SECONDS = 30.0  # the daemon's exit after the unmount (a hung one never exits)


def fifo(path: Path) -> None:
    os.mkfifo(path)


def unix_socket(path: Path) -> None:
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(path))  # (the file stays when the socket is closed)


def null_device(path: Path) -> None:
    os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # /dev/null: reads as no bytes


SPECIAL: dict[str, Callable[[Path], None]] = {"fifo": fifo, "socket": unix_socket, "device": null_device}


def replace_with(path: Path, kind: str) -> None:
    path.unlink()
    SPECIAL[kind](path)


@pytest.mark.parametrize("kind", SPECIAL)
def test_a_special_file_as_a_chunk_is_refused_at_once(public: Path, kind: str) -> None:
    store = public / "a.zarr"
    raw_array(store, VALUES, 4)
    replace_with(store / "c" / "1", kind)
    with mounted(store, public / "mnt", ["ro", "allow_other", "timeout=5"]) as mount:
        began = time.monotonic()
        assert read_as(mount.data) == errno.EIO
        assert read_as(mount.data, None) == errno.EIO
        assert time.monotonic() - began < 10  # (two reader processes: at once, not a timeout)
        assert read_as(mount.chunk("c/0")) == VALUES[:4].tobytes()
        log = mount.log()
        assert any("'c/1'" in line and "not a regular file" in line for line in log.splitlines()), log
        assert mount.unmount(timeout=UNMOUNT_SECONDS) == 0


@pytest.mark.parametrize("kind", SPECIAL)
def test_a_special_file_as_metadata_is_refused_at_once(public: Path, kind: str) -> None:
    root = public / "g.zarr"
    group = zarr.open_group(str(root), mode="w")
    for name in ("good", "bad"):
        group.create_array(name, shape=(12,), chunks=(4,), dtype="u1")[...] = VALUES
    replace_with(root / "bad" / "zarr.json", kind)
    with mounted(root, public / "mnt", ["ro", "allow_other"]) as mount:
        assert read_as(mount.path / "bad" / "data") in (errno.EIO, errno.ENOENT)
        assert read_as(mount.path / "good" / "data") == VALUES.tobytes()
        # The group lists its other children at once: the refused one is skipped, as a child
        # whose document is malformed.
        listing = subprocess.run(["ls", str(mount.path)], capture_output=True, timeout=READ_SECONDS,
                                 check=True)
        assert b"good" in listing.stdout.split() and b"bad" not in listing.stdout.split()
        assert any("bad/zarr.json" in line and "not a regular file" in line
                   for line in mount.log().splitlines()), mount.log()
        assert mount.unmount(timeout=UNMOUNT_SECONDS) == 0


def test_a_fifo_as_the_root_document_fails_the_mount_at_once(public: Path) -> None:
    store = public / "a.zarr"
    raw_array(store, VALUES, 4)
    replace_with(store / "zarr.json", "fifo")
    with pytest.raises(AssertionError) as failed, mounted(store, public / "mnt", ["ro"]):
        pass
    assert "not a regular file" in str(failed.value)
