"""The unit files in systemd/ pass `systemd-analyze verify`.

verify works offline on unit files, without systemd running as PID 1, so this runs in
containers too. It checks the syntax, that the executables exist, and that a mount unit's
name matches its Where=. The units name /usr/local/bin/zarrfs, which scripts/install links;
the copies verified here name this environment's zarrfs instead, so the test does not depend
on the link.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers.systemd_units import SYSTEMD_ANALYZE, UNIT_DIR, unit_lines, verify, zarrfs_executable

UNITS = ["zarrfs@.service", "mnt-zarr.mount", "mnt-zarr.automount"]
INSTALLED_ZARRFS = "/usr/local/bin/zarrfs"

pytestmark = [pytest.mark.fast, pytest.mark.skipif(
    SYSTEMD_ANALYZE is None, reason="systemd-analyze missing (scripts/install installs it)"
)]


def copy_units(dest: Path, zarrfs: str) -> None:
    for name in UNITS:
        text = (UNIT_DIR / name).read_text()
        (dest / name).write_text(text.replace(INSTALLED_ZARRFS, zarrfs))


def test_units_exist_and_name_installed_zarrfs() -> None:
    for name in UNITS:
        assert (UNIT_DIR / name).is_file(), name
    service = (UNIT_DIR / "zarrfs@.service").read_text()
    assert f"ExecStart={INSTALLED_ZARRFS} mount -f ${{SOURCE}} %f -o ${{OPTIONS}}" in service
    assert "Type=notify" in service
    assert "EnvironmentFile=/etc/zarrfs/%i.conf" in service
    assert "ExecStopPost=-/usr/bin/fusermount3 " in service
    assert "Type=fuse.zarrfs" in (UNIT_DIR / "mnt-zarr.mount").read_text()


@pytest.mark.parametrize(
    "units",
    [
        # A template is verified as the instance zarrfs@i.service; also verify a real-looking
        # instance, whose %f is /mnt/zarr.
        ["./zarrfs@.service"],
        ["./zarrfs@.service", "./zarrfs@mnt-zarr.service"],
        ["./mnt-zarr.mount", "./mnt-zarr.automount"],
    ],
    ids=["template", "instance", "mount+automount"],
)
def test_units_verify(tmp_path: Path, units: list[str]) -> None:
    copy_units(tmp_path, zarrfs_executable())
    result = verify(tmp_path, *units)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert unit_lines(output) == [], output


def test_verify_catches_a_broken_unit(tmp_path: Path) -> None:
    """The check has teeth: a missing executable and a misnamed mount unit both fail."""
    copy_units(tmp_path, str(tmp_path / "no-such-zarrfs"))
    result = verify(tmp_path, "./zarrfs@.service")
    assert result.returncode != 0
    assert "no-such-zarrfs" in result.stdout + result.stderr

    shutil.copy(tmp_path / "mnt-zarr.mount", tmp_path / "mnt-other.mount")
    result = verify(tmp_path, "./mnt-other.mount")
    assert result.returncode != 0
    assert "Where=" in result.stdout + result.stderr


def test_instance_name_is_the_escaped_mountpoint() -> None:
    """The names the README tells users to use are what systemd-escape produces."""
    escape = shutil.which("systemd-escape")
    if escape is None:
        pytest.skip("systemd-escape missing")
    out = subprocess.run(
        [escape, "--path", "/mnt/zarr"], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "mnt-zarr"
    out = subprocess.run(
        [escape, "--path", "--template=zarrfs@.service", "/mnt/zarr"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.strip() == "zarrfs@mnt-zarr.service"
