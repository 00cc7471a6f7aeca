"""Two writers of one stored object: two zarrfs mounts of the same array (or a mount and
zarr-python), on a local directory and on S3 (a moto server on 127.0.0.1), plain chunks and
shards. Every write-back is a compare-and-swap, so neither writer may lose the other's
updates, even though each holds a stale copy of the chunk in its cache.

The array: 16 x 16 int32 (fill -1), plain 8 x 8 chunks, or one 16 x 16 shard of 8 x 8 inner
chunks. Each round both mounts first read the whole array through `data` (direct_io, so the
read reaches the daemon, which caches the chunks: from the second round on that copy is stale),
then write elements with pwrite and fsync:

* plain: A writes elements of chunk (0, 0) (rows 0-3), B other elements of it (rows 4-7);
* sharded: A writes elements of inner chunk (0, 0) (rows 0-3), B other elements of it (rows
  4-7) and elements of inner chunk (0, 1): every round, both rewrite the one shard.

Conflicts: with plain chunks each write-back finds the chunk replaced by the other mount (its
cached copy is stale), so every round makes them. A shard's write-back reads the stored shard
just before its put, so a conflict needs another writer between that read and the put: on odd
rounds a gate makes one, deterministically (no sleeps). Locally the test holds `flock` on the
shard file (zarrfs's CAS takes it), lets both mounts' fsyncs read the shard and queue on the
lock (seen in /proc/locks), and lets go: whichever puts second must conflict. On S3 the moto
server holds B's conditional PUT until A's fsync has returned, then lets it go: If-Match fails.

After the rounds both are unmounted and zarr-python reads the store: every element holds its
last written value (0 lost updates), and the conflicts (`zarrfs stats`, summed over the
mounts) are > 0.

Also:
(a) zarr-python on the other side. Plain: each round zarr-python rewrites all of chunk (0, 0)
    and then the mount (whose cached chunk is stale) writes two elements of it: the store must
    hold zarr-python's chunk with the mount's two elements, never the mount's stale copy.
    Sharded: zarr-python rewrites all of inner chunk (0, 1) each round, the mount writes
    elements of inner chunk (0, 0) of the same shard; on odd rounds zarr-python's write lands
    between the mount's read of the shard and its put (the gate again). Both must survive.
(b) SIGKILL of mount B half-way, while its write-back waits at the gate (it has read the
    shard or chunk and is about to put): nothing A fsynced is lost, everything B fsynced
    before the kill is in the store, and the elements of B's interrupted write hold the old
    or the new value.

The figures (rounds, lost updates, conflicts) are printed at the end of each test and, when
ZARRFS_STATS names a file, appended to it as JSON lines.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers.figures import report_figures
from tests.helpers.mounting import mounted
from tests.helpers.s3_server import S3Server
from tests.helpers.two_writers import (
    GATE_TIMEOUT,
    INITIAL,
    KEY,
    SHAPE,
    Gate,
    LocalGate,
    Writer,
    in_thread,
    lost,
)

pytestmark = pytest.mark.skipif(
    not os.path.exists("/dev/fuse") or shutil.which("fusermount3") is None,
    reason="needs FUSE (/dev/fuse and fusermount3)",
)
zarr = pytest.importorskip("zarr")

ROUNDS = 50
KILL_AT = ROUNDS // 2



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


@pytest.fixture(params=["local", "s3"])
def kind(request: pytest.FixtureRequest) -> str:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture(params=["plain", "sharded"])
def sharded(request: pytest.FixtureRequest) -> bool:
    return request.param == "sharded"  # type: ignore[no-any-return]


@pytest.fixture
def target(kind: str, sharded: bool, request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    return make_target(kind, sharded, request, tmp_path)


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


# -- the tests -----------------------------------------------------------------------------------


def test_two_mounts_write_one_chunk(target: Target, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    request: pytest.FixtureRequest) -> None:
    expected = INITIAL.copy()
    gate = make_gate(target, monkeypatch)
    gated_rounds = 0
    with two_writers(target.source, target.mount_options, tmp_path) as (a, b):
        mount_a, mount_b = a.mount, b.mount
        for r in range(ROUNDS):
            a.read_all()
            b.read_all()
            writes_a = values(1, r, a_elements(r))
            writes_b = values(2, r, b_elements(r, target.sharded))
            a.write(writes_a)
            b.write(writes_b)
            if target.sharded and r % 2 == 1:
                gated_rounds += 1
                both_through_gate(target, gate, a, b)
            else:
                a.fsync()
                b.fsync()
            for where, value in {**writes_a, **writes_b}.items():
                expected[where] = value
        seen_a, seen_b = a.read_all(), b.read_all()
        conflicts_a = int(a.stats()["write_conflicts"])
        conflicts_b = int(b.stats()["write_conflicts"])
    assert mount_a.process.returncode == 0, mount_a.log()
    assert mount_b.process.returncode == 0, mount_b.log()
    stored = target.read()
    record = {"rounds": ROUNDS, "gated_rounds": gated_rounds, "lost_updates": lost(stored, expected),
              "conflicts_a": conflicts_a, "conflicts_b": conflicts_b,
              "stale_in_a_at_end": lost(seen_a, expected), "stale_in_b_at_end": lost(seen_b, expected)}
    figures_line(request, "two mounts", record)
    assert record["lost_updates"] == 0, (record, stored, expected)
    assert conflicts_a + conflicts_b > 0, record
    if target.sharded:
        assert conflicts_a + conflicts_b >= gated_rounds, record
    else:  # every write-back but the first finds the chunk replaced by the other mount
        assert conflicts_a + conflicts_b >= 2 * ROUNDS - 2, record
    for mount in (mount_a, mount_b):
        assert "Traceback" not in mount.log(), mount.log()


def both_through_gate(target: Target, gate: Gate, a: Writer, b: Writer) -> None:
    """Both mounts write the shard back, B's read of it before A's put, B's put after."""
    with gate.closed():
        if target.kind == "local":  # both read the shard, then queue on its lock
            joins = [in_thread(a.fsync), in_thread(b.fsync)]
            gate.wait_held(2)
        else:  # B's put waits at the server while A writes the shard back
            joins = [in_thread(b.fsync)]
            gate.wait_held(1)
            a.fsync()
        gate.release()
        for join in joins:
            join()


def test_mount_and_zarr_python_write_one_object(target: Target, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch,
                                                request: pytest.FixtureRequest) -> None:
    """(a) zarr-python writes whole chunks; the mount writes elements of the same stored
    object (the same plain chunk, or another inner chunk of the same shard)."""
    expected = INITIAL.copy()
    gate = make_gate(target, monkeypatch)
    gated_rounds = 0
    other = target.open_zarr()
    # zarr-python's whole chunk: chunk (0, 0) (plain), inner chunk (0, 1) (sharded).
    zp_box = (slice(0, 8), slice(8, 16)) if target.sharded else (slice(0, 8), slice(0, 8))
    with mounted(target.source, tmp_path / "m", target.mount_options) as mount:
        writer = Writer("M", mount).open()
        try:
            for r in range(ROUNDS):
                writer.read_all()  # stale after zarr-python's write
                block = np.full((8, 8), 3_000_000 + r * 100, "<i4") + np.arange(64, dtype="<i4").reshape(8, 8)
                writes = values(1, r, a_elements(r))
                writer.write(writes)
                if target.sharded and r % 2 == 1:  # zarr-python between the read and the put
                    gated_rounds += 1
                    with gate.closed():
                        join = in_thread(writer.fsync)
                        gate.wait_held(1)
                        other[zp_box] = block
                        gate.release()
                        join()
                else:
                    other[zp_box] = block  # before the mount's write-back: its cache is stale
                    writer.fsync()
                expected[zp_box] = block
                for where, value in writes.items():
                    expected[where] = value
            conflicts = int(writer.stats()["write_conflicts"])
        finally:
            writer.close()
    assert mount.process.returncode == 0, mount.log()
    stored = target.read()
    record = {"rounds": ROUNDS, "gated_rounds": gated_rounds, "lost_updates": lost(stored, expected),
              "conflicts": conflicts}
    figures_line(request, "mount and zarr-python", record)
    assert record["lost_updates"] == 0, (record, stored, expected)
    assert conflicts >= (gated_rounds if target.sharded else ROUNDS - 1), record
    assert "Traceback" not in mount.log(), mount.log()


def test_sigkill_of_one_mount_loses_nothing_acknowledged(target: Target, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         request: pytest.FixtureRequest) -> None:
    """(b) B is killed half-way, while its write-back waits at the gate between its read of
    the stored object and its put; A goes on alone."""
    expected = INITIAL.copy()
    uncertain: dict[tuple[int, int], int] = {}  # B's interrupted write: old or new value
    gate = make_gate(target, monkeypatch)
    with two_writers(target.source, target.mount_options, tmp_path) as (a, b):
        mount_a, mount_b = a.mount, b.mount
        for r in range(ROUNDS):
            a.read_all()
            writes_a = values(1, r, a_elements(r))
            a.write(writes_a)
            a.fsync()
            for where, value in writes_a.items():
                expected[where] = value
            if r < KILL_AT:
                if r == KILL_AT - 1:
                    # Before B's write: every close in a forked child (the stats command)
                    # makes the kernel send FLUSH for B's open file, a write-back.
                    conflicts_b = int(b.stats()["write_conflicts"])
                b.read_all()
                writes_b = values(2, r, b_elements(r, target.sharded))
                b.write(writes_b)
                if r < KILL_AT - 1:
                    b.fsync()
                    for where, value in writes_b.items():
                        expected[where] = value
                    continue
                with gate.closed():
                    join = in_thread(b.fsync)
                    gate.wait_held(1)  # B has read the object and waits to put it
                    mount_b.process.send_signal(signal.SIGKILL)
                    mount_b.process.wait(timeout=20)
                with contextlib.suppress(OSError):
                    join()  # the dead mount fails the fsync
                uncertain = writes_b
        conflicts_a = int(a.stats()["write_conflicts"])
    assert mount_a.process.returncode == 0, mount_a.log()
    assert mount_b.process.returncode == -signal.SIGKILL
    stored = target.read()
    wrong = [(where, int(stored[where]), int(expected[where]), value) for where, value in uncertain.items()
             if stored[where] not in (expected[where], value)]
    landed = sum(1 for where, value in uncertain.items() if stored[where] == value)
    for where, value in uncertain.items():
        if stored[where] == value:
            expected[where] = value
    record = {"rounds": ROUNDS, "killed_at_round": KILL_AT - 1, "lost_updates": lost(stored, expected),
              "interrupted_write_landed": f"{landed}/{len(uncertain)}",
              "conflicts_a": conflicts_a, "conflicts_b_before_kill": conflicts_b}
    figures_line(request, "SIGKILL of mount B", record)
    assert not wrong, wrong
    assert record["lost_updates"] == 0, (record, stored, expected)
    assert "Traceback" not in mount_a.log(), mount_a.log()


def test_write_back_over_a_chunk_the_other_mount_deleted(kind: str, tmp_path: Path,
                                                         request: pytest.FixtureRequest) -> None:
    """Both mounts cache chunk (0, 0); A sets all of it to the fill value (its write-back
    deletes the stored chunk), then B, whose copy is stale, writes one element of it. B's
    write-back must find the chunk gone, merge and store it (fill, and B's element).

    Found failing on S3: a put with If-Match on a key that no longer exists gets 404
    NoSuchKey, not 412, and zarrfs reports it as a store error (EIO) instead of a conflict;
    every later write-back fails the same way, so B's write can never be stored."""
    made = make_target(kind, False, request, tmp_path)
    expected = INITIAL.copy()
    expected[:8, :8] = -1
    expected[5, 3] = 2_000_000
    with two_writers(made.source, made.mount_options, tmp_path) as (a, b):
        mount_b = b.mount
        a.read_all()
        b.read_all()
        a.write({(i, j): -1 for i in range(8) for j in range(8)})
        a.fsync()
        b.write({(5, 3): 2_000_000})
        fsync_error = None
        try:
            b.fsync()
        except OSError as e:
            fsync_error = e
        if fsync_error is not None:  # it would retry its final write-back for a minute
            log = mount_b.log()
            mount_b.process.kill()
    stored = made.read()
    figures_line(request, "write over a chunk the other mount deleted",
                 {"fsync_error": str(fsync_error), "lost_updates": lost(stored, expected),
                  "b_exit_status": mount_b.process.returncode})
    assert fsync_error is None, f"B's fsync failed: {fsync_error}\n{log}"
    assert lost(stored, expected) == 0, (stored, expected)
    assert mount_b.process.returncode == 0, mount_b.log()
