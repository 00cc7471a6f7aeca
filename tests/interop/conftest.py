"""Fixtures of the interop tests."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.helpers.interop_model import Case, model
from tests.helpers.interop_mounts import CLIENT, SERVER
from tests.helpers.mounting import Mount

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


@pytest.fixture(scope="module")
def zarrfs_command(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, ...]]:
    """A command that behaves like the zarrfs script but starts a daemon in milliseconds.

    A daemon started from the script spends about 0.4 s of CPU importing numpy, trio,
    pyfuse3 and fsspec, which is most of the cost of the mount matrix's 150-odd mounts. The
    daemons forked here run the same `zarrfs.cli.main` on the same arguments; the script
    itself is exercised by tests/fuse/test_mount_*.py and test_mount_types.py."""
    socket_path = tmp_path_factory.mktemp("forkserver") / "socket"
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(socket_path)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert server.stdout is not None
        assert server.stdout.readline() == b"ready\n", "the fork server did not start"
        yield (sys.executable, "-S", "-c", CLIENT, str(socket_path))
    finally:
        assert server.stdin is not None
        server.stdin.close()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@pytest.fixture
def array_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory for the array, on tmpfs when there is one (TensorStore and zarrfs fsync
    every object they write)."""
    if os.path.isdir(_TMPFS) and os.access(_TMPFS, os.W_OK):
        directory = Path(tempfile.mkdtemp(prefix="zarrfs-mount-matrix-", dir=_TMPFS))
        try:
            yield directory / "array"
        finally:
            shutil.rmtree(directory, ignore_errors=True)
    else:
        yield tmp_path / "array"


@pytest.fixture
def prepared(case: Case, array_dir: Path, mount_array: Callable[..., Mount],
             zarrfs_command: tuple[str, ...]) -> tuple[Mount, Path]:
    """The case's model written by TensorStore, and mounted (unmounted after the test)."""
    from tests.helpers.interop_io import write_tensorstore  # (TensorStore: not in the light tests)

    write_tensorstore(str(array_dir), case.doc, model(case))
    return mount_array(array_dir, command=zarrfs_command), array_dir
