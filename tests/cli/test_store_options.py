"""The offline commands that open a store (`zarrfs create`, `import`, `resize`) honour every
store option, as a mount does: `-o timeout=` bounds their wait on a store that never answers
(a proxy swallowing all traffic: a partition), and `-o disk_cache=` puts their store's reads
through the disk cache (a real S3 server, moto; zarr-python reads what was imported)."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import zarr

from tests.helpers.mounting import ZARRFS
from tests.helpers.netproxy import proxied
from tests.helpers.s3_server import S3_ENV, S3Server, free_port, serving

TIMEOUT = 1.0
# What a command may take beyond its timeout: its start-up and its exit, on a loaded machine;
# well below the default deadline (30 s), which a command that drops `timeout=` waits out.
MARGIN = 14.0


@pytest.fixture
def s3_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[S3Server]:
    yield from serving(S3Server(free_port()), monkeypatch)


def zarrfs(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ZARRFS, *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **S3_ENV})


@pytest.mark.parametrize("command", [
    ["create", "s3://bucket/a.zarr", "--shape", "40,20", "--dtype", "uint8"],
    ["import", "RAW", "s3://bucket/a.zarr", "--shape", "40,20", "--dtype", "uint8"],
    ["resize", "s3://bucket/a.zarr", "--shape", "40,20"],
], ids=lambda command: command[0])
def test_a_command_gives_up_at_its_timeout(command: list[str], tmp_path: Path) -> None:
    """A store whose every connection is accepted and never answered: the command fails within
    `timeout=` and its start-up, with a line saying why (no traceback), never waiting longer."""
    raw = tmp_path / "raw"
    raw.write_bytes(bytes(40 * 20))
    with proxied(free_port()) as proxy:
        proxy.swallow()
        began = time.monotonic()
        done = zarrfs(*(str(raw) if word == "RAW" else word for word in command),
                      "-o", f"endpoint_url={proxy.url},timeout={TIMEOUT:g}")
        took = time.monotonic() - began
    assert done.returncode != 0, done.stdout
    assert "Traceback" not in done.stderr and done.stderr.strip(), done.stderr
    assert took < TIMEOUT + MARGIN, (took, done.stderr)


def test_import_reads_its_store_through_the_disk_cache(s3_server: S3Server, tmp_path: Path) -> None:
    """`-o disk_cache=DIR`: the store `import` opens is the disk cache's (its directory made and
    used); what was imported reads back whole."""
    values = np.arange(64 * 32, dtype="<u2").reshape(64, 32)
    raw, cache = tmp_path / "raw", tmp_path / "cache"
    raw.write_bytes(values.tobytes())
    url = f"s3://{s3_server.bucket}/imported"
    done = zarrfs("import", str(raw), url, "--shape", "64,32", "--dtype", "uint16", "--chunks", "16,16",
                  "-o", f"endpoint_url={s3_server.endpoint_url},disk_cache={cache}")
    assert done.returncode == 0, done.stderr
    assert cache.is_dir() and any(cache.iterdir()), "no disk cache was opened"
    stored = zarr.open_array(url, mode="r", storage_options=s3_server.s3fs_options())
    assert np.array_equal(stored[...], values)
