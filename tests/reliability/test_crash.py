"""Crash consistency: the daemon is SIGKILLed in the middle of a storm of writes.

Each round creates an array (uint64, 128 x 256, in plain chunks, in shards, or in chunks with
"."-separated keys) holding known "old" values in part of its chunks, mounts it, and starts
worker processes (this file run as a script) that write runs of elements through `data` and
through chunk files, fsync now and then, and close and reopen their files now and then. Every
element a worker writes encodes (worker, write number, element index), so any value found
later names the write it came from. A worker logs each write before making it and, after an
fsync or close returns, that every write before it is durable. The daemon is then killed with
SIGKILL at a random moment of the storm.

Afterwards:

* the daemon is gone within 20 s (one that is not, held in the kernel by a thread in D state,
  fails the round: the kernel stacks of its threads are shown, and its FUSE connection is
  aborted through fusectl, mounted for the purpose if need be, so that nothing stays hung);
* the dead mount answers "Transport endpoint is not connected" until `fusermount3 -u`;
* every chunk and shard still decodes: TensorStore and the zarrfs engine read the whole array,
  and agree;
* every element holds its old value or the value of a write that covered it (nothing torn,
  misplaced or invented), and every write whose fsync or close returned is there (or was
  overwritten by a later write);
* the temporary files of interrupted atomic writes are not taken for chunks, and the next
  mount removes those of dead processes (and only those).

SIGTERM rounds run the same storm and stop the daemon cleanly: it must exit, and every write
that returned must be in the store. A separate test mounts again right on a killed daemon's
mountpoint: `zarrfs mount` must either clear it or fail saying how to.

Rounds: 5 SIGKILL and 2 SIGTERM by default (about 35 s); ZARRFS_SOAK=N runs N SIGKILL and N/3
SIGTERM rounds (about 2.5 s each):

    ZARRFS_SOAK=200 .venv/bin/pytest tests/reliability/test_crash.py

The rounds survived, the writes made and how many of them were durable, the data lost (which
must be 0) and the daemons that did not die are printed at the end of the module and, when
ZARRFS_STATS names a file, appended to it as one JSON line.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from array import array as machine_array
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers.figures import report_figures
from tests.helpers.mounting import (
    ZARRFS,
    Mount,
    abort_connection,
    fuse_connection,
    is_mounted,
    kernel_stacks,
    mounted,
    without_views,
)

pytestmark = pytest.mark.skipif(
    not os.path.exists("/dev/fuse") or shutil.which("fusermount3") is None,
    reason="needs FUSE (/dev/fuse and fusermount3)",
)

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent
SOAK = int(os.environ.get("ZARRFS_SOAK", "0") or 0)
ROUNDS = SOAK or 5
WORKERS = 4
SHAPE = (128, 256)
CHUNKS = (16, 32)
SHARDS = (32, 64)
SHARED_ROWS = range(120, 128)  # written by every worker; the other rows each have one owner
WORKER_SECONDS = 30.0  # a worker gives up after this long even if the daemon lives on
TEMP_PREFIX = ".zarrfs-tmp-"
ENOTCONN_TEXT = "Transport endpoint is not connected"

STATS: Counter[str] = Counter()


# -- the workers (this file run as a script) --------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """What one worker does; passed to it as JSON."""

    mountpoint: str
    log: str
    worker: int
    seed: int
    file_shape: tuple[int, int]  # a chunk file's shape: the chunk or the shard
    key_separator: str

    def chunk_key(self, i: int, j: int) -> str:
        return self.key_separator.join(["c", str(i), str(j)])


def value(worker: int, seq: int, element: int) -> int:
    """What write number `seq` of `worker` puts in `element` (old values have 0xff on top)."""
    return (worker + 1) << 56 | seq << 24 | element


def run_worker(plan: Plan) -> None:
    """Write until the mount fails (the daemon was killed) or time is up."""
    rng = random.Random(plan.seed)
    rows, width = SHAPE
    own_rows = [r for r in range(rows) if r % WORKERS == plan.worker and r not in SHARED_ROWS]
    fh, fw = plan.file_shape
    log = os.open(plan.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    files: dict[str, int] = {}
    dirty: set[str] = set()
    deadline = time.monotonic() + WORKER_SECONDS
    seq = 0
    try:
        while time.monotonic() < deadline:
            seq += 1
            row = rng.choice(SHARED_ROWS if rng.random() < 0.2 else own_rows)
            if rng.random() < 0.5:  # a run inside one row of one chunk file
                j = rng.randrange(width // fw)
                c0 = rng.randrange(j * fw, (j + 1) * fw)
                c1 = rng.randint(c0 + 1, (j + 1) * fw)
                path = f"chunks/{plan.chunk_key(row // fh, j)}"
                offset = ((row % fh) * fw + c0 - j * fw) * 8
            else:  # a run of a row of data, across chunk boundaries
                c0 = rng.randrange(width)
                c1 = rng.randint(c0 + 1, min(width, c0 + 200))
                path = "data"
                offset = (row * width + c0) * 8
            payload = machine_array("Q", [value(plan.worker, seq, row * width + c)
                                          for c in range(c0, c1)])
            if sys.byteorder != "little":
                payload.byteswap()
            os.write(log, f"W {seq} {row} {c0} {c1}\n".encode())
            if path not in files:
                files[path] = os.open(os.path.join(plan.mountpoint, path), os.O_RDWR)
            written = os.pwrite(files[path], payload.tobytes(), offset)
            if written != len(payload) * 8:
                os.write(log, f"X {seq} short write of {written} bytes\n".encode())
                return
            dirty.add(path)
            draw = rng.random()
            if draw < 0.1:
                for name in sorted(dirty):
                    os.fsync(files[name])
                dirty.clear()
                os.write(log, f"F {seq}\n".encode())
            elif draw < 0.13:
                while files:
                    os.close(files.popitem()[1])  # close reports a failed write-back
                dirty.clear()
                os.write(log, f"F {seq}\n".encode())
    except OSError as e:
        os.write(log, f"E {seq} {e.errno}\n".encode())
    finally:
        for fd in files.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        os.close(log)


# -- the log of a storm -----------------------------------------------------------------------


@dataclass
class WorkerLog:
    writes: list[tuple[int, int, int, int]]  # (seq, row, c0, c1), in order
    durable: int  # every write up to this seq is durable: an fsync or close returned after it
    returned: int  # every write up to this seq returned (the one after it failed, if any)
    ended: str  # the worker's last line


def read_log(path: Path) -> WorkerLog:
    writes, durable, failed, ended = [], 0, None, ""
    for line in path.read_text().splitlines():
        kind, *fields = line.split()
        if kind == "W":
            seq, row, c0, c1 = map(int, fields)
            writes.append((seq, row, c0, c1))
        elif kind == "F":
            durable = int(fields[0])
        elif kind in "EX":
            failed = int(fields[0])
        ended = line
    last = writes[-1][0] if writes else 0
    returned = last if failed is None or failed != last else last - 1
    return WorkerLog(writes, durable, returned, ended)


@dataclass
class Verdict:
    old: int = 0  # elements still holding their old value
    new: int = 0  # elements holding a value some write put there
    unexplained: int = 0  # values no write made (torn, misplaced, invented)
    lost: int = 0  # elements where a durable write is missing
    lost_writes: int = 0  # durable writes (some of) whose elements are missing
    first_problem: str = ""


def judge(stored: np.ndarray, old: np.ndarray, logs: list[WorkerLog],
          durable: list[int]) -> Verdict:
    """Check every element of the array found after the crash against the storm's logs;
    `durable[w]` is the last write of worker w that must be in the store."""
    rows, width = SHAPE
    verdict = Verdict()
    element = np.arange(rows * width, dtype=np.uint64).reshape(SHAPE)
    is_old = stored == old
    worker = (stored >> np.uint64(56)).astype(np.int64) - 1
    seq = ((stored >> np.uint64(24)) & np.uint64(0xFFFFFFFF)).astype(np.int64)
    index_ok = (stored & np.uint64(0xFFFFFF)) == element
    # covered[w][s] = (row, c0, c1) of write s of worker w; -1 rows for numbers never used.
    covered = []
    for log in logs:
        table = np.full((max((w[0] for w in log.writes), default=0) + 2, 3), -1, dtype=np.int64)
        for s, row, c0, c1 in log.writes:
            table[s] = (row, c0, c1)
        covered.append(table)
    explained = np.zeros(SHAPE, dtype=bool)
    r_index, c_index = np.indices(SHAPE)
    for w, table in enumerate(covered):
        mine = (worker == w) & index_ok & (seq < len(table))
        found = table[np.where(mine, seq, 0)]
        explained |= mine & (found[..., 0] == r_index) & (found[..., 1] <= c_index) & (
            c_index < found[..., 2])
    bad = ~is_old & ~explained
    verdict.old = int(is_old.sum())
    verdict.new = int(explained.sum())
    verdict.unexplained = int(bad.sum())
    if verdict.unexplained:
        r, c = np.argwhere(bad)[0]
        verdict.first_problem = (f"element ({r}, {c}) holds {int(stored[r, c]):#018x}, neither its "
                                 f"old value {int(old[r, c]):#018x} nor a value written there")
    # Durability: the last durable write of each worker to each element must be there, or a
    # later write of that worker, or (in the shared rows only) any other worker's write.
    for w, log in enumerate(logs):
        required = np.zeros(SHAPE, dtype=np.int64)
        for s, row, c0, c1 in log.writes:
            if s <= durable[w]:
                required[row, c0:c1] = s
        need = required > 0
        from_w = explained & (worker == w)
        from_other = explained & (worker != w) & np.isin(r_index, list(SHARED_ROWS))
        kept = (from_w & (seq >= required)) | from_other
        missing = need & ~kept
        if missing.any():
            verdict.lost += int(missing.sum())
            verdict.lost_writes += len(set(required[missing].tolist()))
            if not verdict.first_problem:
                r, c = np.argwhere(missing)[0]
                verdict.first_problem = (
                    f"element ({r}, {c}): worker {w}'s write {required[r, c]} is durable "
                    f"but the store holds {int(stored[r, c]):#018x}")
    return verdict


# -- the array --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    name: str
    shards: bool
    separator: str

    @property
    def file_shape(self) -> tuple[int, int]:
        return SHARDS if self.shards else CHUNKS


LAYOUTS = [Layout("chunks", False, "/"), Layout("shards", True, "/"),
           Layout("dotted-keys", False, ".")]


def create(root: Path, layout: Layout, round_: int, rng: random.Random) -> np.ndarray:
    """Create the array with `zarrfs create` and store old values in about 70 % of its chunks
    (file grid cells) with TensorStore; the array as stored."""
    args = [ZARRFS, "create", str(root), "--shape", "128,256", "--dtype", "uint64",
            "--chunks", "16,32", "--codec", "zstd:1", "--key-separator", layout.separator]
    if layout.shards:
        args += ["--shards", "32,64"]
    subprocess.run(args, check=True, capture_output=True)
    old = np.arange(SHAPE[0] * SHAPE[1], dtype=np.uint64).reshape(SHAPE)
    old |= np.uint64(0xFF << 56 | round_ << 32)
    fh, fw = layout.file_shape
    for i in range(SHAPE[0] // fh):
        for j in range(SHAPE[1] // fw):
            if rng.random() < 0.3:
                old[i * fh : (i + 1) * fh, j * fw : (j + 1) * fw] = 0  # never stored: fill value
    write = tensorstore_open(root).write(old).result()
    del write
    return tensorstore_read(root)


def tensorstore_open(root: Path) -> Any:
    import tensorstore as ts

    spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(root)}}
    return ts.open(spec, open=True).result()


def tensorstore_read(root: Path) -> np.ndarray:
    return np.asarray(tensorstore_open(root).read().result())


def zarrfs_read(root: Path) -> tuple[np.ndarray, int]:
    """The whole array read by the zarrfs engine, and how many chunk objects it counts."""
    from zarrfs.array_metadata import open_array
    from zarrfs.grid import Box
    from zarrfs.store import Store

    array = open_array(Store.open(str(root), read_only=True))
    try:
        return np.array(array.read(Box((0, 0), SHAPE))), array.stored_chunk_count()
    finally:
        array.close()


def temporaries(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob(f"{TEMP_PREFIX}*") if p.is_file())


def chunk_objects(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and p.name != "zarr.json"
            and not p.name.startswith(TEMP_PREFIX)]


# -- reporting --------------------------------------------------------------------------------


@pytest.fixture(scope="module", autouse=True)
def _print_figures(request: pytest.FixtureRequest) -> Iterator[None]:
    started = time.monotonic()
    yield
    seconds = time.monotonic() - started
    report_figures(request.config,
            f"crash: {STATS['survived']} of {STATS['rounds']} SIGKILL rounds and "
            f"{STATS['sigterm_survived']} of {STATS['sigterm_rounds']} SIGTERM rounds survived; "
            f"{STATS['writes']} writes, {STATS['durable_writes']} of them durable when the "
            f"daemon was stopped; data lost: {STATS['lost']} elements "
            f"({STATS['lost_writes']} writes), {STATS['unexplained']} unexplained values; "
            f"{STATS['hangs']} daemons that did not die; {STATS['temporaries']} temporary "
            f"files left by the kills; {seconds:.0f} s",
            {"test": "crash", **STATS, "seconds": round(seconds, 1)})


# -- the tests --------------------------------------------------------------------------------


Worker = tuple[subprocess.Popen[bytes], Path]


def start_storm(mount: Mount, workdir: Path, layout: Layout, seed: int) -> list[Worker]:
    workers = []
    for w in range(WORKERS):
        log = workdir / f"worker{w}.log"
        plan = Plan(str(mount.path), str(log), w, seed * 100 + w, layout.file_shape,
                    layout.separator)
        process = subprocess.Popen(
            [sys.executable, __file__, json.dumps(plan.__dict__)],
            env={**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), str(TESTS.parent)])},
            stderr=subprocess.PIPE)
        workers.append((process, log))
    return workers


def wait_for_writes(logs: list[Path], at_least: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        counts = [p.read_text().count("W ") if p.exists() else 0 for p in logs]
        if min(counts) >= at_least:
            return
        time.sleep(0.01)
    raise AssertionError(f"the workers did not start writing within {timeout} s")


def stop_daemon(mount: Mount, connection: str | None, signum: int,
                timeout: float = 20.0) -> str | None:
    """Signal the daemon and wait for it to exit; None, or what it was stuck in (after
    aborting its FUSE connection so that it and the writers can go)."""
    mount.process.send_signal(signum)
    try:
        mount.process.wait(timeout=timeout)
        return None
    except subprocess.TimeoutExpired:
        pass
    stacks = kernel_stacks([mount.process.pid])
    abort_connection(connection, mount.path)
    try:
        mount.process.wait(timeout=60)  # after SIGTERM it may still write back, then exit
    except subprocess.TimeoutExpired:
        mount.process.kill()
        mount.process.wait(timeout=30)
    return (f"the daemon did not exit within {timeout} s of {signal.Signals(signum).name}; "
            f"its threads were in:\n{stacks}")


def finish_workers(workers: list[Worker], connection: str | None,
                   mountpoint: Path) -> str | None:
    """Wait for the writers to stop; None, or why they did not by themselves."""
    problem = None
    for process, log in workers:
        try:
            _, stderr = process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            last = log.read_text()[-80:]
            problem = problem or f"a writer hung on the mount ({log.name}: {last!r})"
            abort_connection(connection, mountpoint)
            process.kill()
            _, stderr = process.communicate(timeout=30)
        if process.returncode != 0:
            problem = problem or f"a writer failed: {stderr.decode(errors='replace')}"
    return problem


def assert_dead_mount(mountpoint: Path) -> None:
    """What a program sees on the mountpoint of a killed daemon."""
    assert is_mounted(mountpoint), "the mount vanished with its daemon"
    for probe in (os.listdir, os.statvfs):
        with pytest.raises(OSError) as failed:
            probe(mountpoint)
        assert failed.value.errno == errno.ENOTCONN, failed.value
        assert failed.value.strerror == ENOTCONN_TEXT


def check_store(root: Path, old: np.ndarray, logs: list[WorkerLog], durable: list[int],
                what: str) -> np.ndarray:
    """Every chunk decodes (TensorStore and the zarrfs engine agree), no value is unexplained
    and no durable write is missing; the array as stored."""
    stored = tensorstore_read(root)  # raises if a chunk or shard does not decode
    engine, counted = zarrfs_read(root)
    assert np.array_equal(engine, stored), "the zarrfs engine and TensorStore disagree"
    assert counted == len(chunk_objects(root)), (
        f"temporary files counted as chunks: {temporaries(root)}")
    verdict = judge(stored, old, logs, durable)
    STATS["writes"] += sum(len(log.writes) for log in logs)
    STATS["durable_writes"] += sum(sum(1 for w in log.writes if w[0] <= d)
                                   for log, d in zip(logs, durable, strict=True))
    STATS["lost"] += verdict.lost
    STATS["lost_writes"] += verdict.lost_writes
    STATS["unexplained"] += verdict.unexplained
    assert verdict.unexplained == 0 and verdict.lost == 0, (
        f"{what}: {verdict}; the workers ended with {[log.ended for log in logs]}")
    return stored


@pytest.mark.parametrize("round_", range(ROUNDS))
def test_sigkill_mid_storm_keeps_every_chunk_whole_and_every_fsynced_write(
        round_: int, tmp_path: Path) -> None:
    layout = LAYOUTS[round_ % len(LAYOUTS)]
    rng = random.Random(f"{round_}-{os.environ.get('ZARRFS_SEED', time.time_ns())}")
    root = tmp_path / "array.zarr"
    old = create(root, layout, round_, rng)
    mountpoint = tmp_path / "mnt"
    STATS["rounds"] += 1

    with mounted(root, mountpoint) as mount:
        daemon_pid = mount.process.pid
        connection = fuse_connection(mountpoint)
        workers = start_storm(mount, tmp_path, layout, rng.randrange(1 << 30))
        hang = None
        try:
            wait_for_writes([log for _, log in workers], at_least=rng.randrange(1, 40))
            time.sleep(rng.uniform(0.0, 0.5))  # not a synchronization: a random crash point
            hang = stop_daemon(mount, connection, signal.SIGKILL)
        finally:
            stuck = finish_workers(workers, connection, mountpoint)
        STATS["hangs"] += hang is not None
        assert_dead_mount(mountpoint)
        result = subprocess.run(["fusermount3", "-u", str(mountpoint)], capture_output=True,
                                text=True)
        assert result.returncode == 0, result.stderr
        assert not is_mounted(mountpoint)

    # The store, as the crash left it.
    logs = [read_log(log) for _, log in workers]
    STATS["temporaries"] += len(temporaries(root))
    stored = check_store(root, old, logs, [log.durable for log in logs],
                         f"round {round_} ({layout.name})")

    # The next mount removes the temporaries of dead processes, and only those.
    chunk_dir = root if layout.separator == "." else root / "c" / "0"
    dead = chunk_dir / f"{TEMP_PREFIX}{daemon_pid}-{rng.getrandbits(48):012x}-0"
    alive = chunk_dir / f"{TEMP_PREFIX}{os.getpid()}-{rng.getrandbits(48):012x}-1"
    chunk_dir.mkdir(parents=True, exist_ok=True)
    dead.write_bytes(b"half a chunk")
    alive.write_bytes(b"a chunk being written by a live process")
    with mounted(root, mountpoint) as mount:
        deadline = time.monotonic() + 10
        while any(p != alive for p in temporaries(root)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert temporaries(root) == [alive], mount.log()
        assert mount.data.read_bytes() == stored.astype("<u8").tobytes()
        assert mount.unmount() == 0, mount.log()
    alive.unlink()
    assert np.array_equal(tensorstore_read(root), stored), "a mount without writes changed data"
    assert hang is None, hang
    assert stuck is None, stuck
    STATS["survived"] += 1


@pytest.mark.parametrize("round_", range(max(2, ROUNDS // 3)))
def test_sigterm_mid_storm_stores_every_write_that_returned(round_: int, tmp_path: Path) -> None:
    """SIGTERM is a clean stop: the daemon writes everything back, then unmounts and exits."""
    layout = LAYOUTS[round_ % len(LAYOUTS)]
    rng = random.Random(f"term-{round_}-{os.environ.get('ZARRFS_SEED', time.time_ns())}")
    root = tmp_path / "array.zarr"
    old = create(root, layout, round_, rng)
    STATS["sigterm_rounds"] += 1
    with mounted(root, tmp_path / "mnt") as mount:
        connection = fuse_connection(mount.path)
        workers = start_storm(mount, tmp_path, layout, rng.randrange(1 << 30))
        hang = None
        try:
            wait_for_writes([log for _, log in workers], at_least=rng.randrange(1, 40))
            time.sleep(rng.uniform(0.0, 0.5))  # not a synchronization: a random crash point
            hang = stop_daemon(mount, connection, signal.SIGTERM)
        finally:
            stuck = finish_workers(workers, connection, mount.path)
        STATS["hangs"] += hang is not None
        if hang is None:
            assert mount.process.returncode == 0, mount.log()
            assert not is_mounted(mount.path)
    logs = [read_log(log) for _, log in workers]
    check_store(root, old, logs, [log.returned for log in logs], f"SIGTERM round {round_}")
    assert temporaries(root) == []
    assert hang is None, hang
    assert stuck is None, stuck
    STATS["sigterm_survived"] += 1


def test_mounting_on_a_killed_daemons_mountpoint_clears_it_or_says_how(tmp_path: Path) -> None:
    """Right after the kill, as a user would: the kernel still caches the root's attributes."""
    root = tmp_path / "array.zarr"
    create(root, LAYOUTS[0], 0, random.Random(0))
    mountpoint = tmp_path / "mnt"
    with mounted(root, mountpoint) as mount:
        assert mount.data.stat().st_size == SHAPE[0] * SHAPE[1] * 8
        mount.process.kill()
        mount.process.wait(timeout=10)
        assert_dead_mount(mountpoint)
        again = subprocess.run([ZARRFS, "mount", str(root), str(mountpoint)],
                               capture_output=True, text=True, timeout=60)
        try:
            if again.returncode == 0:
                assert "cleared the stale mount" in again.stderr, again.stderr
                assert without_views(os.listdir(mountpoint)) == ["chunks", "data", "zarr.json"]
            else:
                message = again.stderr.strip()
                assert len(message.splitlines()) == 1 and "Traceback" not in message, message
                assert "fusermount3 -u" in message or "umount" in message, (
                    f"the refusal does not say how to clear the dead mount: {message!r}")
        finally:
            subprocess.run(["fusermount3", "-u", str(mountpoint)], capture_output=True)
            if is_mounted(mountpoint):
                subprocess.run(["fusermount3", "-u", "-z", str(mountpoint)], capture_output=True)
        assert not is_mounted(mountpoint)


if __name__ == "__main__":
    fields = json.loads(sys.argv[1])
    fields["file_shape"] = tuple(fields["file_shape"])
    run_worker(Plan(**fields))
