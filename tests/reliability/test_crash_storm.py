"""Crash consistency: the daemon is SIGKILLed in the middle of a storm of writes.

Each round creates an array (uint64, 128 x 256, in plain chunks, in shards, or in chunks with
"."-separated keys) holding known "old" values in part of its chunks, mounts it, and starts
worker processes (tests/helpers/crash_workers.py run as a script) that write runs of elements
through `data` and through chunk files, fsync now and then, and close and reopen their files
now and then. Every element a worker writes encodes (worker, write number, element index), so
any value found later names the write it came from. A worker logs each write before making it
and, after an fsync or close returns, that every write before it is durable. The daemon is
then killed with SIGKILL at a random moment of the storm.

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
that returned must be in the store. test_crash_mountpoint.py mounts again right on a killed
daemon's mountpoint.

Rounds: 5 SIGKILL and 2 SIGTERM by default (about 35 s); ZARRFS_SOAK=N runs N SIGKILL and N/3
SIGTERM rounds (about 2.5 s each):

    ZARRFS_SOAK=200 .venv/bin/pytest tests/reliability/test_crash_storm.py

The rounds survived, the writes made and how many of them were durable, the data lost (which
must be 0) and the daemons that did not die are printed at the end of the module and, when
ZARRFS_STATS names a file, appended to it as one JSON line.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import crash_workers
from tests.helpers.crash_arrays import LAYOUTS, Layout, assert_dead_mount, create, tensorstore_read
from tests.helpers.crash_workers import SHAPE, WORKERS, Plan, WorkerLog, judge, read_log
from tests.helpers.figures import report_figures
from tests.helpers.mounting import (
    Mount,
    abort_connection,
    fuse_connection,
    is_mounted,
    kernel_stacks,
    mounted,
)

pytestmark = pytest.mark.skipif(
    not os.path.exists("/dev/fuse") or shutil.which("fusermount3") is None,
    reason="needs FUSE (/dev/fuse and fusermount3)",
)


HERE = Path(__file__).resolve().parent
TESTS = HERE.parent
SOAK = int(os.environ.get("ZARRFS_SOAK", "0") or 0)
ROUNDS = SOAK or 5


TEMP_PREFIX = ".zarrfs-tmp-"


STATS: Counter[str] = Counter()


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
            [sys.executable, crash_workers.__file__, json.dumps(plan.__dict__)],
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
