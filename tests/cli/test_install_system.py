"""`zarrfs install-system --prefix ROOT`: /sbin/mount.zarrfs links to the installation's helper,
the units name its `zarrfs` by absolute path and pass `systemd-analyze verify` as installed, and
the example mount unit uses the helper (`Type=zarrfs`), not `zarrfs` from PATH."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.systemd_units import UNIT_DIR, unit_lines, verify, zarrfs_executable
from zarrfs.cli.install_system import UNITS, install_system, installed_commands
from zarrfs.errors import ZarrfsError

pytestmark = pytest.mark.fast


def install(prefix: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([zarrfs_executable(), "install-system", "--prefix", str(prefix)],
                          capture_output=True, text=True, timeout=60, check=False)


def test_the_package_holds_the_repositorys_units() -> None:
    for name in ("zarrfs@.service", "mnt-zarr.mount", "mnt-zarr.automount"):
        assert (UNITS / name).read_bytes() == (UNIT_DIR / name).read_bytes(), name


def test_links_the_helper_and_writes_the_units(tmp_path: Path) -> None:
    done = install(tmp_path)
    assert done.returncode == 0, done.stderr
    zarrfs = Path(zarrfs_executable()).resolve()
    helper = tmp_path / "sbin" / "mount.zarrfs"
    assert helper.is_symlink() and Path(helper.readlink()) == zarrfs.parent / "mount.zarrfs"
    service = (tmp_path / "etc/systemd/system/zarrfs@.service").read_text()
    assert f"ExecStart={zarrfs} mount -f ${{SOURCE}} %f -o ${{OPTIONS}}" in service
    assert "/usr/local/bin/zarrfs" not in service
    examples = tmp_path / "usr/local/share/zarrfs/systemd"
    mount_unit = (examples / "mnt-zarr.mount").read_text()
    assert "\nType=zarrfs\n" in mount_unit and "\nType=fuse.zarrfs\n" not in mount_unit
    assert (examples / "mnt-zarr.automount").read_text() == (UNIT_DIR / "mnt-zarr.automount").read_text()
    assert done.stdout.splitlines()[0] == f"linked {helper} -> {zarrfs.parent / 'mount.zarrfs'}"
    assert "daemon-reload" not in done.stdout  # (only for --prefix /)

    again = install(tmp_path)  # a second run replaces what the first wrote
    assert again.returncode == 0 and again.stdout == done.stdout, again.stderr


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze missing")
def test_the_installed_units_verify(tmp_path: Path) -> None:
    assert install(tmp_path).returncode == 0
    units = tmp_path / "units"
    units.mkdir()
    shutil.copy(tmp_path / "etc/systemd/system/zarrfs@.service", units)
    for name in ("mnt-zarr.mount", "mnt-zarr.automount"):
        shutil.copy(tmp_path / "usr/local/share/zarrfs/systemd" / name, units)
    for names in (["./zarrfs@.service", "./zarrfs@mnt-zarr.service"],
                  ["./mnt-zarr.mount", "./mnt-zarr.automount"]):
        result = verify(units, *names)
        output = result.stdout + result.stderr
        assert result.returncode == 0 and unit_lines(output) == [], output


def test_merged_usr_is_named(tmp_path: Path) -> None:
    (tmp_path / "usr" / "sbin").mkdir(parents=True)
    (tmp_path / "sbin").symlink_to("usr/sbin")
    lines = install_system(tmp_path, argv0=zarrfs_executable())
    assert (tmp_path / "usr" / "sbin" / "mount.zarrfs").is_symlink()
    merged = f"linked {tmp_path}/sbin/mount.zarrfs ({tmp_path}/usr/sbin on merged /usr) -> "
    assert lines[0].startswith(merged)


def test_without_console_scripts_it_says_where_it_looked(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "executable", str(tmp_path / "bin" / "python"))
    with pytest.raises(ZarrfsError, match=r"no zarrfs and mount\.zarrfs console scripts in"):
        installed_commands(argv0=str(tmp_path / "elsewhere" / "zarrfs"))
    assert not (tmp_path / "sbin").exists()
