"""A scratch machine for the docs' examples: the paths they name, under a temporary root.

The docs name the paths a reader would use (`/srv/data/array.zarr`, `/mnt/zarr`, `/tmp/x`).
An example runs with every absolute path below `/srv`, `/mnt` and `/tmp` moved below the
scratch root (`/mnt/zarr` -> `ROOT/mnt/zarr`), in the working directory `ROOT/work`, with the
test's `zarrfs` first on PATH; its shown output is compared with the root taken out again.
Remote examples get the URLs of the test servers (`Scratch.urls`) in place of the ones they
show. Whatever the example mounted below the root is unmounted at the end.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

_PATH = re.compile(r"(?:(?<=://)|(?<![\w.~/$-]))/(srv|mnt|tmp)(?=/)")  # (icechunk:///srv/repo too)
BIN = os.path.dirname(sys.executable)


@dataclass
class Scratch:
    root: Path
    stack: contextlib.ExitStack  # the servers of its givens, stopped after every unmount
    env: dict[str, str] = field(default_factory=dict)
    urls: dict[str, str] = field(default_factory=dict)  # shown in the docs -> the test server's
    directory: Path | None = None  # where examples run: ROOT/work unless a given says

    @property
    def work(self) -> Path:
        return self.directory or self.root / "work"

    def path(self, shown: str) -> Path:
        """Where the example's path `shown` (`/mnt/zarr`) is on this scratch machine."""
        return Path(self.localize(shown))

    def localize(self, text: str) -> str:
        for shown, actual in self.urls.items():
            text = text.replace(shown, actual)
        return _PATH.sub(lambda m: f"{self.root}/{m[1]}", text)

    def delocalize(self, text: str) -> str:
        text = text.replace(f"{self.root}/", "/")
        for shown, actual in self.urls.items():
            text = text.replace(actual, shown)
        return text

    def environment(self) -> dict[str, str]:
        env = dict(os.environ, **self.env)
        # (mount helpers are in /sbin, where mount(8) looks for them)
        env["PATH"] = f"{BIN}:{env.get('PATH', '/usr/bin:/bin')}:/usr/sbin:/sbin"
        return env

    def run(self, *command: str) -> subprocess.CompletedProcess[str]:
        """A command of the scratch machine's setup; it must succeed."""
        done = subprocess.run(command, cwd=self.work, env=self.environment(), capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, f"{command}: {done.stdout}{done.stderr}"
        return done

    def mount(self, source: str, mountpoint: str, options: str = "rw") -> Path:
        target = self.path(mountpoint)
        target.mkdir(parents=True, exist_ok=True)
        self.run("zarrfs", "mount", self.localize(source), str(target), "-o", options)
        return target


@contextlib.contextmanager
def scratch(root: Path) -> Iterator[Scratch]:
    """A scratch machine with the directories a fresh Debian has (`/srv`, `/mnt`, `/tmp`);
    everything mounted below it is unmounted at the end."""
    for name in ("srv", "mnt", "tmp", "work"):
        (root / name).mkdir(parents=True)
    with contextlib.ExitStack() as stack:
        try:
            yield Scratch(root, stack)
        finally:
            unmount_below(root)


def mounts_below(root: Path) -> list[str]:
    prefix = f"{os.path.realpath(root)}/"
    with open("/proc/self/mounts") as f:
        points = [line.split()[1].replace("\\040", " ") for line in f]
    return [p for p in points if p.startswith(prefix)]


def unmount_below(root: Path) -> None:
    """Unmount, deepest first, whatever is mounted below `root`, and wait for the daemons'
    write-back (a mount is gone from /proc/mounts only once its daemon let go of it)."""
    for point in sorted(mounts_below(root), key=len, reverse=True):
        if subprocess.run(["fusermount3", "-u", point], capture_output=True).returncode != 0:
            subprocess.run(["fusermount3", "-u", "-z", point], capture_output=True)
    deadline = time.monotonic() + 60
    while mounts_below(root) and time.monotonic() < deadline:
        time.sleep(0.05)
