"""Fixtures of the interop tests."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

# zarrfs and TensorStore fsync every object they write; on a disk that makes the matrix take
# six times as long. tmpfs keeps the same code paths (atomic rename, directory fsync) cheap.
_TMPFS = "/dev/shm"


@pytest.fixture
def scratch(tmp_path: Path) -> Iterator[Path]:
    """An empty directory for arrays, on tmpfs when there is one."""
    if os.path.isdir(_TMPFS) and os.access(_TMPFS, os.W_OK):
        directory = Path(tempfile.mkdtemp(prefix="zarrfs-interop-", dir=_TMPFS))
        try:
            yield directory
        finally:
            shutil.rmtree(directory, ignore_errors=True)
    else:
        yield tmp_path
