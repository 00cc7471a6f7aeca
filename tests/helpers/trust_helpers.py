"""What the tests of a mount's trust share (`test_store_links.py`, `test_special_files.py`,
`test_user_option.py`): a directory every user may enter, and reads by another user.

The tests run as root and read through `allow_other` as `nobody`, as a mount in fstab serves
the users of a machine."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import zarr

NOBODY = pwd.getpwnam("nobody")
# A reader's script: the file's bytes on stdout, or the errno of the failure as its status.
_READ = ("import os, sys\n"
         "try:\n"
         "    data = open(sys.argv[1], 'rb').read()\n"
         "except OSError as e:\n"
         "    sys.exit(100 + e.errno)\n"
         "sys.stdout.buffer.write(data)\n")
READ_SECONDS = 20.0  # a read that takes longer hangs (it should fail at once)
# The reader's interpreter: the system's, which every user may run (the tests' own may lie in a
# home directory only root may enter: a pyenv or conda Python), else the tests' own.
READER_PYTHON = shutil.which("python3", path=os.defpath) or sys.executable


def needs_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root: the tests serve another user (nobody) through allow_other")


@pytest.fixture
def public() -> Iterator[Path]:
    """A directory below /tmp that every user may enter (pytest's own is root's alone)."""
    needs_root()
    path = Path(tempfile.mkdtemp(prefix="zarrfs-trust-", dir="/tmp"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def read_as(path: Path, user: pwd.struct_passwd | None = NOBODY) -> bytes | int:
    """The bytes of `path` read by `user` (None: root) in a process of its own, or the errno
    its read failed with. AssertionError if the read does not end within READ_SECONDS."""
    ids = {} if user is None else {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}
    try:
        done = subprocess.run([READER_PYTHON, "-c", _READ, str(path)], capture_output=True,
                              timeout=READ_SECONDS, **ids)  # type: ignore[call-overload]
    except subprocess.TimeoutExpired:
        raise AssertionError(f"a read of {path} did not end within {READ_SECONDS:g} s") from None
    if done.returncode == 0:
        return bytes(done.stdout)
    assert done.returncode > 100, done.stderr
    return int(done.returncode - 100)


def raw_array(path: Path, values: np.ndarray, chunks: int) -> None:
    """A v3 array of uint8 without compression: a chunk's file holds its bytes as they are."""
    array = zarr.create_array(str(path), shape=values.shape, chunks=(chunks,), dtype="u1",
                              compressors=None, fill_value=0)
    array[...] = values


def secret_file(directory: Path, data: bytes) -> Path:
    """A file of root's that nobody else may read (mode 0600), outside any store."""
    directory.mkdir(mode=0o700, exist_ok=True)
    path = directory / "secret"
    path.write_bytes(data)
    path.chmod(0o600)
    return path
