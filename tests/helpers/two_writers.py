"""Two writers of one stored object, through two mounts (tests/reliability/test_two_mounts_*.py, and
the store conformance, serve and cloud tests that reuse them): the array they write, a writer
of its `data`, and the gate that holds a write-back of KEY just before its put."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tests.helpers.mounting import ZARRFS, Mount

SHAPE = (16, 16)
ITEM = 4
INITIAL = np.arange(SHAPE[0] * SHAPE[1], dtype="<i4").reshape(SHAPE)
GATE_TIMEOUT = 10.0  # a bound on waiting for a daemon to reach the gate (a failure, not a pace)
KEY = "c/0/0"  # the chunk, or the shard, both writers write


class Gate:
    """Holds write-backs of KEY just before their put, so that another write can land between
    a write-back's read and its put (see the module docstring)."""

    def wait_held(self, count: int) -> None: ...

    def release(self) -> None: ...

    @contextlib.contextmanager
    def closed(self) -> Iterator[Gate]:
        yield self


class LocalGate(Gate):
    """Holds `flock` on the stored file: zarrfs's compare-and-swap waits for it after it has
    read the object (readers never take it)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd: int | None = None
        self.inode = 0

    @contextlib.contextmanager
    def closed(self) -> Iterator[Gate]:
        import fcntl

        self.fd = os.open(self.path, os.O_RDONLY)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX)
            self.inode = os.fstat(self.fd).st_ino
            yield self
        finally:
            self.release()

    def waiters(self) -> int:
        with open("/proc/locks") as f:
            return sum(1 for line in f if "->" in line
                       and any(part.endswith(f":{self.inode}") for part in line.split()))

    def wait_held(self, count: int) -> None:
        deadline = time.monotonic() + GATE_TIMEOUT
        while self.waiters() < count:
            if time.monotonic() > deadline:
                with open("/proc/locks") as f:
                    raise AssertionError(f"{count} write-backs never waited on {self.path} "
                                         f"(inode {self.inode}); /proc/locks:\n{f.read()}")
            time.sleep(0.002)

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # lets the waiters go
            self.fd = None


@dataclass
class Writer:
    name: str
    mount: Mount
    fd: int = -1

    def open(self) -> Writer:
        self.fd = os.open(self.mount.data, os.O_RDWR)
        return self

    def close(self) -> None:
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1

    def read_all(self) -> np.ndarray:
        """Read the whole array through the mount: its daemon caches every chunk it reads."""
        raw = os.pread(self.fd, INITIAL.nbytes, 0)
        return np.frombuffer(raw, "<i4").reshape(SHAPE)

    def write(self, elements: dict[tuple[int, int], int]) -> None:
        for (i, j), value in elements.items():
            assert os.pwrite(self.fd, np.int32(value).tobytes(), (i * SHAPE[1] + j) * ITEM) == ITEM

    def fsync(self) -> None:
        os.fsync(self.fd)

    def stats(self) -> dict[str, Any]:
        result = subprocess.run([ZARRFS, "stats", str(self.mount.path), "--json"],
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)  # type: ignore[no-any-return]


def in_thread(action: Callable[[], None]) -> Callable[[], None]:
    """Run `action` in a thread; the returned join re-raises what it raised."""
    failure: list[BaseException] = []

    def run() -> None:
        try:
            action()
        except BaseException as e:
            failure.append(e)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()

    def join() -> None:
        thread.join(GATE_TIMEOUT + 30)
        assert not thread.is_alive(), "an fsync never returned"
        if failure:
            raise failure[0]

    return join


def lost(store: np.ndarray, expected: np.ndarray) -> int:
    return int(np.count_nonzero(store != expected))
