"""Where the two writers of tests/reliability/test_two_mounts_*.py write: the array (16 x 16 int32,
fill -1, plain 8 x 8 chunks or one 16 x 16 shard of 8 x 8 inner chunks) on a local directory
or on S3 (a moto server on 127.0.0.1), the gate that makes a conflict on S3, the elements each
writer writes, and two mounts of one source (the fixtures `kind`, `sharded` and `target`:
tests/reliability/conftest.py)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr

from tests.helpers.figures import report_figures
from tests.helpers.mounting import mounted
from tests.helpers.s3_server import S3Server
from tests.helpers.two_writers import GATE_TIMEOUT, INITIAL, KEY, SHAPE, Gate, LocalGate, Writer

ROUNDS = 50


# -- the store: local or S3, and its gate --------------------------------------------------------


@dataclass
class Target:
    kind: str  # "local" or "s3"
    sharded: bool
    source: str  # what `zarrfs mount` takes
    zarr_store: Any  # what zarr-python opens
    storage_options: dict[str, Any] | None
    mount_options: list[str]
    local_path: Path | None
    server: S3Server | None

    def create(self) -> None:
        array = zarr.create_array(
            store=self.zarr_store, shape=SHAPE, chunks=(8, 8), shards=(16, 16) if self.sharded else None,
            dtype="<i4", fill_value=-1, compressors=zarr.codecs.ZstdCodec(level=1),
            storage_options=self.storage_options)
        array[...] = INITIAL

    def open_zarr(self, mode: str = "r+") -> Any:
        return zarr.open_array(self.zarr_store, mode=mode, storage_options=self.storage_options)

    def read(self) -> np.ndarray:
        return np.asarray(self.open_zarr("r")[...])


def make_target(kind: str, sharded: bool, request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    # direct_io: every read through `data` reaches the daemon (and its chunk cache).
    options = ["direct_io", "cache=16M"]
    if kind == "local":
        path = tmp_path / "array.zarr"
        made = Target(kind, sharded, str(path), str(path), None, options, path, None)
    else:
        server: S3Server = request.getfixturevalue("s3_server")
        made = Target(kind, sharded, f"s3://{server.bucket}/array", f"s3://{server.bucket}/array",
                      {"endpoint_url": server.endpoint_url, "key": "testing", "secret": "testing"},
                      [*options, f"endpoint_url={server.endpoint_url}"], None, server)
    made.create()
    return made


class S3Gate(Gate):
    """The moto server (in this process) holds the first conditional PUT (If-Match) of KEY
    until released, and tells when it has finished it."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, key: str) -> None:
        from moto.s3.responses import S3Response

        self.armed = False
        self.held = threading.Event()
        self.go = threading.Event()
        self.done = threading.Event()
        original = S3Response.put_object
        gate = self

        def put_object(response: Any) -> Any:
            if not (gate.armed and response.headers.get("If-Match") and response.path.endswith(key)):
                return original(response)
            gate.armed = False
            gate.held.set()
            try:
                gate.go.wait(GATE_TIMEOUT)
                return original(response)
            finally:
                gate.done.set()

        monkeypatch.setattr(S3Response, "put_object", put_object)

    @contextlib.contextmanager
    def closed(self) -> Iterator[Gate]:
        self.held.clear()
        self.go.clear()
        self.done.clear()
        self.armed = True
        try:
            yield self
        finally:
            self.armed = False
            self.release()

    def wait_held(self, count: int) -> None:
        assert count == 1
        assert self.held.wait(GATE_TIMEOUT), "the conditional PUT never reached the server"

    def release(self) -> None:
        if self.held.is_set() and not self.go.is_set():
            self.go.set()
            assert self.done.wait(GATE_TIMEOUT), "the held PUT never finished"
        self.go.set()


def make_gate(target: Target, monkeypatch: pytest.MonkeyPatch) -> Gate:
    if target.kind == "local":
        assert target.local_path is not None
        return LocalGate(target.local_path / KEY)
    return S3Gate(monkeypatch, f"/array/{KEY}")


# -- writing through a mount ---------------------------------------------------------------------


def a_elements(r: int) -> list[tuple[int, int]]:
    """Two elements of chunk / inner chunk (0, 0), rows 0-3: each is rewritten every 8 rounds."""
    return [(r % 4, r % 8), ((r + 1) % 4, (3 * r + 4) % 8)]


def b_elements(r: int, sharded: bool) -> list[tuple[int, int]]:
    """Rows 4-7 of chunk / inner chunk (0, 0); sharded, also an element of inner chunk (0, 1)."""
    elements = [(4 + r % 4, (r + 5) % 8), (4 + (r + 2) % 4, (5 * r) % 8)]
    if sharded:
        elements[1] = (r % 8, 8 + (3 * r) % 8)
    return elements


def values(writer: int, r: int, elements: list[tuple[int, int]]) -> dict[tuple[int, int], int]:
    return {where: writer * 1_000_000 + r * 100 + n for n, where in enumerate(elements)}


def figures_line(request: pytest.FixtureRequest, what: str, record: dict[str, Any]) -> None:
    record = {"test": request.node.name, **record}
    line = f"{what} [{request.node.callspec.id}]: " + ", ".join(
        f"{k} {v}" for k, v in record.items() if k != "test")
    print(line)
    report_figures(request.config, line, record)


@contextlib.contextmanager
def two_writers(source: str, options: list[str], tmp_path: Path) -> Iterator[tuple[Writer, Writer]]:
    """Two mounts of `source`, each with `data` open for writing; both unmounted at the end."""
    with mounted(source, tmp_path / "a", options) as mount_a, \
            mounted(source, tmp_path / "b", options) as mount_b:
        a, b = Writer("A", mount_a).open(), Writer("B", mount_b).open()
        try:
            yield a, b
        finally:
            a.close()
            b.close()
