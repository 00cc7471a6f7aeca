"""What the tests of `-o recheck=` (tests/array/test_recheck_*.py) share: the array other writers
change (16-bit, 32 x 32 in 8 x 8 chunks), where it lives (`Backend`: a local directory, or S3
through a local moto server; the fixtures `backend`, `local` and `s3` in tests/array/conftest.py),
and the mount read back as files, with its counters."""

from __future__ import annotations

import io
import json
import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import tensorstore as ts
import zarr

from tests.helpers.mounting import ZARRFS, Mount
from tests.helpers.s3_server import S3Server

SHAPE = (32, 32)
CHUNK = 8  # a 4 x 4 grid of chunks
DTYPE = "<u2"
ITEM = 2
VALUES = (np.arange(SHAPE[0] * SHAPE[1], dtype=DTYPE).reshape(SHAPE) * 3 + 1).astype(DTYPE)


# -- the store, local or S3 ------------------------------------------------------------------


@dataclass
class Backend:
    """Where the arrays live, and how the other writers and the mount reach them."""

    kind: str
    base: str  # a local directory, or s3://bucket/prefix
    server: S3Server | None = None
    prefix: str = ""  # in the bucket

    def url(self, name: str) -> str:
        return f"{self.base}/{name}"

    @property
    def mount_options(self) -> list[str]:
        return [] if self.server is None else [f"endpoint_url={self.server.endpoint_url}"]

    def _options(self) -> dict[str, Any]:
        return {} if self.server is None else {"storage_options": self.server.s3fs_options()}

    def create(self, name: str, *, shards: tuple[int, int] | None = None,
               values: np.ndarray = VALUES) -> zarr.Array:
        array = zarr.create_array(store=self.url(name), shape=values.shape, chunks=(CHUNK, CHUNK),
                                  shards=shards, dtype=DTYPE, fill_value=0, **self._options())
        array[...] = values
        return array

    def writer(self, name: str) -> zarr.Array:
        """zarr-python, opening the array afresh: another writer."""
        return zarr.open_array(self.url(name), mode="r+", **self._options())

    def tensorstore(self, name: str) -> Any:
        if self.server is None:
            kvstore: dict[str, Any] = {"driver": "file", "path": self.url(name)}
        else:
            kvstore = {"driver": "s3", "bucket": self.server.bucket, "path": f"{self.prefix}/{name}/",
                       "endpoint": self.server.endpoint_url, "aws_region": "us-east-1",
                       "aws_credentials": {"type": "environment"}}
        return ts.open({"driver": "zarr3", "kvstore": kvstore}, open=True).result()

    def stored_size(self, name: str, key: str) -> int:
        if self.server is None:
            return os.path.getsize(f"{self.url(name)}/{key}")
        import s3fs

        fs = s3fs.S3FileSystem(**self.server.s3fs_options())
        return int(fs.info(f"{self.server.bucket}/{self.prefix}/{name}/{key}")["size"])


# -- reading the mount -----------------------------------------------------------------------


def read(path: Path) -> bytes:
    """A fresh open and a whole read (close-to-open: the open is what rechecks)."""
    with open(path, "rb", buffering=0) as f:
        return f.read()


def data(mount: Mount, shape: tuple[int, int] = SHAPE) -> np.ndarray:
    return np.frombuffer(read(mount.data), DTYPE).reshape(shape)


def chunk(mount: Mount, i: int, j: int) -> np.ndarray:
    return np.frombuffer(read(mount.chunk(f"c/{i}/{j}")), DTYPE).reshape(CHUNK, CHUNK)


def npy(mount: Mount) -> np.ndarray:
    return np.load(io.BytesIO(read(mount.path / "data.npy")))


def block(values: np.ndarray, i: int, j: int) -> np.ndarray:
    return values[i * CHUNK : (i + 1) * CHUNK, j * CHUNK : (j + 1) * CHUNK]


def stats(mount: Mount) -> dict[str, float]:
    result = subprocess.run([ZARRFS, "stats", str(mount.path), "--json"], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    counters: dict[str, float] = json.loads(result.stdout)
    return counters


def grown(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """How much each counter grew (figures that are not counters, as the user, left out)."""
    return {name: after[name] - before[name] for name in after if isinstance(after[name], int | float)}


def rechecked(mount: Mount, before: dict[str, float], reopen: Callable[[], None], rounds: int,
              rechecks: int, deadline: float = 120.0) -> dict[str, float]:
    """The counters' growth since `before` once `reopen` (a round of opens, each a recheck) ran
    `rounds` times, and more until `rechecks` rechecks were counted. More only where the log
    says why: on a loaded machine a recheck can go unanswered within its bound (CHECK_SECONDS,
    2 s), and the mount then serves what it has and asks the store nothing for OUTAGE_SECONDS,
    as designed; the opens meanwhile are not rechecks (a moto answer slowed to 3 s counted 1
    of 12)."""
    for _ in range(rounds):
        reopen()
    delta = grown(before, stats(mount))
    end = time.monotonic() + deadline
    while delta["rechecks"] < rechecks:
        assert "the store is not answering" in mount.log(), (delta, mount.log())
        assert time.monotonic() < end, f"{delta['rechecks']} rechecks in {deadline:g} s:\n{mount.log()}"
        reopen()
        delta = grown(before, stats(mount))
    return delta


def seen_through_outage(mount: Mount, check: Callable[[], None], deadline: float = 60.0) -> None:
    """`check` (a round of opens that asserts what they read) until it passes. Again only
    where the log says why: a recheck left unanswered on a loaded machine starts an outage, in
    which the mount serves what it has (as `rechecked`); a change made outside shows once the
    store answers again."""
    end = time.monotonic() + deadline
    while True:
        try:
            check()
            return
        except AssertionError:
            if "the store is not answering" not in mount.log() or time.monotonic() > end:
                raise
        time.sleep(0.5)  # (the outage's end is the store's answer: polled, not awaited)
