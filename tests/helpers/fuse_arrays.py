"""The array of the tests of the filesystem on a real FUSE mount (tests/fuse/test_mount_*.py):
60 x 70 uint16, sharded or plain, created by `zarrfs create` (and filled by TensorStore in the
fixture `array_path`, tests/fuse/conftest.py), and TensorStore's reading of it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import tensorstore as ts

from tests.helpers.mounting import ZARRFS

SHAPE = (60, 70)
DTYPE = np.dtype("<u2")


def make_array(path: Path, *, shards: bool = True, fill: int = 0, codec: str = "zstd:1",
               separator: str = "/") -> None:
    args = [ZARRFS, "create", str(path), "--shape", "60,70", "--dtype", "uint16",
            "--codec", codec, "--fill-value", str(fill), "--key-separator", separator]
    args += ["--chunks", "5,7", "--shards", "20,35"] if shards else ["--chunks", "20,35"]
    subprocess.run(args, check=True, capture_output=True)


def tensorstore_read(path: Path) -> np.ndarray:
    spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path)}}
    return np.asarray(ts.open(spec).result().read().result())


def reference_values() -> np.ndarray:
    return (np.arange(np.prod(SHAPE), dtype=np.uint64) * 7919 % 65521).astype(DTYPE).reshape(SHAPE)
