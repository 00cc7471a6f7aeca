"""The arrays of the crash tests (tests/reliability/test_crash_*.py): uint64, 128 x 256, in
plain chunks, in shards, or in chunks with "."-separated keys, holding known "old" values in
part of their chunks; read back by TensorStore; and what a dead mount answers.
"""

from __future__ import annotations

import errno
import os
import random
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers.crash_workers import SHAPE
from tests.helpers.mounting import ZARRFS, is_mounted

CHUNKS = (16, 32)
SHARDS = (32, 64)


ENOTCONN_TEXT = "Transport endpoint is not connected"


# -- the array --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    name: str
    shards: bool
    separator: str

    @property
    def file_shape(self) -> tuple[int, int]:
        return SHARDS if self.shards else CHUNKS


LAYOUTS = [Layout("chunks", False, "/"), Layout("shards", True, "/"),
           Layout("dotted-keys", False, ".")]


def create(root: Path, layout: Layout, round_: int, rng: random.Random) -> np.ndarray:
    """Create the array with `zarrfs create` and store old values in about 70 % of its chunks
    (file grid cells) with TensorStore; the array as stored."""
    args = [ZARRFS, "create", str(root), "--shape", "128,256", "--dtype", "uint64",
            "--chunks", "16,32", "--codec", "zstd:1", "--key-separator", layout.separator]
    if layout.shards:
        args += ["--shards", "32,64"]
    subprocess.run(args, check=True, capture_output=True)
    old = np.arange(SHAPE[0] * SHAPE[1], dtype=np.uint64).reshape(SHAPE)
    old |= np.uint64(0xFF << 56 | round_ << 32)
    fh, fw = layout.file_shape
    for i in range(SHAPE[0] // fh):
        for j in range(SHAPE[1] // fw):
            if rng.random() < 0.3:
                old[i * fh : (i + 1) * fh, j * fw : (j + 1) * fw] = 0  # never stored: fill value
    write = tensorstore_open(root).write(old).result()
    del write
    return tensorstore_read(root)


def tensorstore_open(root: Path) -> Any:
    import tensorstore as ts

    spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(root)}}
    return ts.open(spec, open=True).result()


def tensorstore_read(root: Path) -> np.ndarray:
    return np.asarray(tensorstore_open(root).read().result())


def assert_dead_mount(mountpoint: Path) -> None:
    """What a program sees on the mountpoint of a killed daemon."""
    assert is_mounted(mountpoint), "the mount vanished with its daemon"
    for probe in (os.listdir, os.statvfs):
        with pytest.raises(OSError) as failed:
            probe(mountpoint)
        assert failed.value.errno == errno.ENOTCONN, failed.value
        assert failed.value.strerror == ENOTCONN_TEXT
