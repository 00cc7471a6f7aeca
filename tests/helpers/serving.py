"""Run the real `zarrfs serve` for a test, and always stop it (tests/serve/).

The server runs as a child process on a free port of 127.0.0.1 (`--listen 127.0.0.1:0`); it
says where it serves on its standard output, which is read for the URL. Stopping it is a
SIGTERM and a wait, which is when its final write-back is done."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import zarr

from tests.helpers.mounting import ZARRFS

START_SECONDS = 60.0  # (a loaded 2-core machine: the command's imports alone take seconds)


@dataclass
class Server:
    url: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM, and the exit status once everything written is stored."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(f"the server did not stop within {timeout:g} s:\n{self.log()}") from None


def start(source: str | Path, log_path: Path, options: Sequence[str] = (), args: Sequence[str] = (),
          *, command: Sequence[str] = (ZARRFS,), env: dict[str, str] | None = None,
          listen: str = "127.0.0.1:0") -> Server:
    """Start `zarrfs serve` and wait until it serves (AssertionError if it exits first)."""
    line = [*command, "serve", str(source), "--listen", listen, *args]
    if options:
        line += ["-o", ",".join(options)]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(line, stdout=subprocess.PIPE, stderr=log,
                                   env={**os.environ, **(env or {})})
    assert process.stdout is not None
    deadline = time.monotonic() + START_SECONDS
    said = b""
    while b"\n" not in said:
        if not select.select([process.stdout], [], [], max(0.0, deadline - time.monotonic()))[0]:
            process.kill()
            process.wait()
            raise AssertionError(f"zarrfs serve did not serve within {START_SECONDS:g} s:\n"
                                 f"{log_path.read_text(errors='replace')}")
        got = os.read(process.stdout.fileno(), 4096)
        if not got:
            process.wait()
            raise AssertionError(f"zarrfs serve exited ({process.returncode}) before serving:\n"
                                 f"{log_path.read_text(errors='replace')}")
        said += got
    first = said.decode().splitlines()[0]
    assert first.startswith("serving "), first
    return Server(first.removeprefix("serving ").strip(), process, log_path)


@contextlib.contextmanager
def served(source: str | Path, tmp_path: Path, options: Sequence[str] = (), args: Sequence[str] = (),
           **kwargs: object) -> Iterator[Server]:
    """`zarrfs serve` of `source` for the duration of the block."""
    server = start(source, tmp_path / f"serve-{time.monotonic_ns()}.log", options, args, **kwargs)  # type: ignore[arg-type]
    try:
        yield server
    finally:
        server.stop()


def curl(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[bytes]:
    """The real curl, quiet, failing on nothing (the test reads the status it printed)."""
    return subprocess.run(["curl", "-s", "-S", *args], capture_output=True, timeout=timeout)


def status_of(*args: str, timeout: float = 60.0) -> int:
    """The HTTP status curl got for a request (its body discarded)."""
    done = curl("-o", "/dev/null", "-w", "%{http_code}", *args, timeout=timeout)
    return int(done.stdout or b"0")


def headers_of(*args: str) -> dict[str, str]:
    """The response headers of a request curl makes (names in lower case; the last status
    line as ":status")."""
    done = curl("-D", "-", "-o", "/dev/null", *args)
    found: dict[str, str] = {}
    for line in done.stdout.decode("latin-1").splitlines():
        if line.startswith("HTTP/"):
            found = {":status": line.split()[1]}
        elif ":" in line:
            name, _, value = line.partition(":")
            found[name.strip().lower()] = value.strip()
    return found


def group_of_one(tmp_path: Path, name: str, values: np.ndarray, chunks: tuple[int, ...]) -> Path:
    """A v3 group `g.zarr` in `tmp_path` holding one array `name` of `values` (zarr-python)."""
    group = zarr.open_group(tmp_path / "g.zarr", mode="w", zarr_format=3)
    group.create_array(name, shape=values.shape, chunks=chunks, dtype=values.dtype)[...] = values
    return tmp_path / "g.zarr"
