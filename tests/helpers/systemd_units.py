"""What the tests of the systemd units (tests/cli/test_systemd.py, test_install_system.py)
share: the repository's units, `systemd-analyze verify` run on a directory of them and the
lines of its output about ours, and this environment's zarrfs console script."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

UNIT_DIR = Path(__file__).resolve().parents[2] / "systemd"
SYSTEMD_ANALYZE = shutil.which("systemd-analyze")


def zarrfs_executable() -> str:
    """The zarrfs console script of the running environment."""
    candidate = Path(sys.executable).parent / "zarrfs"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("zarrfs")
    if found is None:
        pytest.fail("no zarrfs console script; run scripts/install")
    return found


def verify(directory: Path, *units: str) -> subprocess.CompletedProcess[str]:
    assert SYSTEMD_ANALYZE is not None
    return subprocess.run(
        [SYSTEMD_ANALYZE, "verify", "--man=no", *units],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def unit_lines(output: str) -> list[str]:
    """The lines of verify's output about our units (it may also talk about others)."""
    return [line for line in output.splitlines() if "zarrfs" in line or "mnt-zarr" in line]
