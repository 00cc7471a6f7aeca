"""What the security tests (tests/reliability/test_security_*.py) share: a small v3 array
to mount, written and read back without zarrfs, a pwrite that fsyncs, and the errno an action
fails with."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from fsspec.implementations.local import LocalFileSystem

from zarrfs import array_metadata
from zarrfs.formats.v3 import metadata_from_json
from zarrfs.grid import Box
from zarrfs.store import Store

SHAPE = (16, 16)
VALUES = np.arange(256, dtype="<i4").reshape(SHAPE) * 3 + 1


def array_doc(shape: tuple[int, ...] = SHAPE, chunks: tuple[int, ...] = (8, 8),
              encoding: tuple[str, str] = ("default", "/")) -> dict[str, Any]:
    return {
        "zarr_format": 3,
        "node_type": "array",
        "shape": list(shape),
        "data_type": "int32",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunks)}},
        "chunk_key_encoding": {"name": encoding[0], "configuration": {"separator": encoding[1]}},
        "fill_value": 0,
        "attributes": {},
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                   {"name": "zstd", "configuration": {"level": 1}}],
    }


def create_array(path: Path) -> None:
    """A 16x16 int32 array in 8x8 chunks holding VALUES."""
    array = array_metadata.create_array(Store(LocalFileSystem(), str(path)), metadata_from_json(array_doc()))
    try:
        array.write(Box((0, 0), SHAPE), VALUES)
        array.flush()
    finally:
        array.close()


def read_array(path: Path) -> np.ndarray:
    array = array_metadata.open_array(Store(LocalFileSystem(), str(path), read_only=True))
    try:
        return array.read(Box((0, 0), SHAPE))
    finally:
        array.close()


def pwrite(path: str | Path, data: bytes, offset: int, *, fsync: bool = True) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        assert os.pwrite(fd, data, offset) == len(data)
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


def errno_of(action: Callable[[], object]) -> int:
    """The errno an action fails with, 0 when it succeeds."""
    try:
        action()
    except OSError as e:
        return e.errno or -1
    return 0
