"""No command hangs on a mount whose daemon is stuck: `zarrfs mount` onto it, `zarrfs stats`,
the helper fstab's `mount -t zarrfs` runs and the Python API each give up after their bound,
saying the mount does not answer and how to abort it. The daemon is stopped (SIGSTOP) after
the kernel cached its root's attributes, so that a stat alone still answers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import zarr

from tests.helpers.mounting import ZARRFS, mounted
from zarrfs.daemon.mountpoint import STAT_SECONDS

PROBES = {
    "zarrfs mount": lambda source, mnt: [ZARRFS, "mount", str(source), str(mnt)],
    "zarrfs mount -f": lambda source, mnt: [ZARRFS, "mount", "-f", str(source), str(mnt)],
    "mount.zarrfs": lambda source, mnt: [sys.executable, "-c", "import sys; from zarrfs.cli import "
                                         "mount_helper_main as m; sys.exit(m())", str(source), str(mnt),
                                         "-o", "ro"],
    "zarrfs stats": lambda source, mnt: [ZARRFS, "stats", str(mnt)],
    "zarrfs.mount": lambda source, mnt: [sys.executable, "-c", "import sys, zarrfs\ntry:\n"
                                         f" zarrfs.mount({str(source)!r}, {str(mnt)!r})\n"
                                         "except zarrfs.MountError as e:\n print(e, file=sys.stderr)"
                                         "; sys.exit(1)"],
    "Mount.stats": lambda source, mnt: [sys.executable, "-c", "import sys\nfrom zarrfs.api import "
                                        f"read_stats\ntry:\n read_stats({str(mnt)!r})\nexcept "
                                        "Exception as e:\n print(e, file=sys.stderr); sys.exit(1)"],
}


def test_every_probe_of_a_stopped_mount_gives_up_saying_how_to_abort(tmp_path: Path) -> None:
    source = tmp_path / "a.zarr"
    zarr.create_array(source, shape=(8,), dtype="<i2", chunks=(4,))[...] = np.arange(8)
    with mounted(source, tmp_path / "mnt") as mount:
        os.listdir(mount.path)
        os.stat(mount.path)  # the root's attributes, cached by the kernel (for 60 s)
        mount.process.send_signal(signal.SIGSTOP)
        probes: dict[str, subprocess.Popen[str]] = {}
        try:
            began = time.monotonic()
            probes = {name: subprocess.Popen(command(source, mount.path), stdout=subprocess.PIPE,
                                             stderr=subprocess.PIPE, text=True)
                      for name, command in PROBES.items()}
            results = {}
            for name, probe in probes.items():  # (one after another: the first hung waits for all)
                try:
                    _, err = probe.communicate(timeout=STAT_SECONDS + 30 - (time.monotonic() - began))
                except subprocess.TimeoutExpired:
                    err = "(hung)"
                results[name] = (probe.returncode, err)
        finally:
            for probe in probes.values():
                if probe.poll() is None:
                    probe.kill()
            mount.process.send_signal(signal.SIGCONT)
            for probe in probes.values():
                probe.wait(timeout=30)
        for name, (status, err) in results.items():
            assert status == 1, (name, status, err)
            assert f"mountpoint {mount.path} does not answer" in err, (name, err)
            assert "/abort" in err and f"fusermount3 -u {mount.path}" in err, (name, err)
        assert os.listdir(mount.path)  # it serves again once it runs
