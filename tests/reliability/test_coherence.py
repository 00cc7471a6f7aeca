"""Coherence within one mount: the views of the same bytes agree once a write has returned.

An array directory shows its elements three times: `data` (the whole array, flat C order,
little-endian, served with the kernel's page cache), `data.npy` (an .npy header, then the bytes
of `data`; page cache too) and `chunks/c/I/J` (one file per chunk, direct_io). The promise:
after a write() to any of them returns, a read() of any file of the mount showing the same
bytes returns the new bytes, through an fd opened before the write (its pages warm in the
kernel's cache) or after it; and no read mixes two versions of one chunk.

The array: uint32, 2048 x 1024, chunks of 64 x 128 (32 KiB each, zstd; 32 x 8 chunks, 8 MiB),
created with zarr-python, mounted read-write with cache=2M, so chunks are written back,
evicted and reloaded all the time. A row of `data` is 4096 bytes, one page; `data.npy`'s
pages straddle two rows (its header is 128 bytes).

test_write_then_read_across_views (the main test): one process runs 1,000 rounds. Each
round picks a chunk, a few of its "round rows" (rows r with r % 4 == 0) and a run of its
columns, reads them through `data` and `data.npy` (which caches their pages, and checks the
previous round's values are there), writes a value pattern unique to the round and the element
(round << 11 | element) with one pwrite per row through one view, and reads the elements back
with one pread per view through the other views:

* half the rounds write through the chunk file and read through `data` and `data.npy`, half
  write through `data` and read through the chunk file and `data.npy`;
* "before": the reads use fds opened before the round (long-lived, pages warm); "after": fresh
  opens after the write returned (the long-lived ones stay open); "closed": the long-lived fds
  of `data` and `data.npy` are closed before the write and the reads open fresh ones (the pages
  the kernel keeps of a closed file must be dropped at the next open).

Meanwhile three background processes write `data` in the other rows (r % 4 == 1, 2, 3, one
process each), two writes each per round (the rounds hand out tokens, so the background keeps
pace instead of starving the rounds): half of them in the chunk the round is using at that
moment, so the chunk the round writes is being written by others too. Each reads its write
back at once through `data`, and every fourth also through the chunk file and `data.npy`
(fresh opens), and counts mismatches.

A read that shows none of the round's values is stale, one that shows some of them and some
older values is torn, one that shows a value no write ever put there is corrupt; all three
must be 0, as must the background processes' mismatches. After unmounting, zarr-python must
read every row as its writer left it (no lost update).

Torn reads: one process rewrites a whole chunk (chunk (3, 7), the last of its row band, so
`data.npy`'s page boundaries split its rows) through its chunk file, one pwrite of 32 KiB,
all elements = k for k = 1, 2, ...; another reads it 2,000 times; every read must be uniform.

* test_whole_chunk_rewrites_are_never_torn: reads the daemon answers in one reply: the chunk
  file (all of it, or a range starting and ending mid-row), one row of the chunk through
  `data` (within one page), one page of `data.npy` (the chunk's elements of two rows);
* test_whole_chunk_rewrites_are_never_torn_in_reads_of_many_pages: one pread of the chunk's
  64 rows (64 pages) through `data` (long-lived fd or fresh open) and `data.npy`.

test_writes_through_data_and_data_npy_at_once: two processes write 16 bytes at a time, one
through `data`, one through `data.npy` (other elements, other pages), 300 writes each; both
must finish within HANG_TIMEOUT seconds (they take about one).

Soak: ZARRFS_SOAK_ROUNDS=N runs the main test and the torn-read tests N times each (each run
a fresh array and mount; the data/data.npy writers test runs once). Seeds:
ZARRFS_SEED=S repeats a run. The figures (rounds, reads checked, stale, torn, background
writes checked) are printed at the end of each test and, when ZARRFS_STATS names a file,
appended to it as one JSON line per test.

    ZARRFS_SOAK_ROUNDS=20 .venv/bin/pytest tests/reliability/test_coherence.py

Races show mostly on a loaded machine: run the soak beside two spinning processes (one per
core, `python3 -c "while True: pass"`). That is how the main test found the cache's race that
tests/array/test_written_back_during_load.py now makes on purpose (it failed in about half of the
runs so, and passed every run on a quiet machine).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import random
import shutil
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers.figures import report_figures
from tests.helpers.mounting import Mount, abort_connection, fuse_connection, kernel_stacks, mounted

pytestmark = pytest.mark.skipif(
    not os.path.exists("/dev/fuse") or shutil.which("fusermount3") is None,
    reason="needs FUSE (/dev/fuse and fusermount3)",
)

SOAK_RUNS = max(1, int(os.environ.get("ZARRFS_SOAK_ROUNDS", "1") or 1))
ROUNDS = 1000
TORN_READS = 2000
WORKERS = 3
BACKGROUND_PER_ROUND = 2  # writes each background process may make per round
SHAPE = (2048, 1024)
CHUNKS = (64, 128)
GRID = (SHAPE[0] // CHUNKS[0], SHAPE[1] // CHUNKS[1])
CACHE = "2M"
ITEM = 4
ROUND_ROWS = CHUNKS[0] // 4  # round rows per chunk: local rows 0, 4, ..., 60
INITIAL_MARK = 0x8000_0000  # initial values have the top bit; written values never do
ELEMENT_BITS = 11  # round values: round << 11 | element (element < ROUND_ROWS * CHUNKS[1])
TORN_CHUNK = (3, 7)
TIMEOUT = 240.0  # seconds a run may take before it counts as hung
BASE_SEED = int(os.environ.get("ZARRFS_SEED", time.time_ns() % (1 << 32)))

TOTALS: Counter[str] = Counter()


PAGE = 4096
PAGED_KINDS = {"data", "data fresh", "npy"}  # whole-chunk reads of many pages


def initial(rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    return (INITIAL_MARK | (rows * SHAPE[1] + cols)).astype(np.uint32)


def round_value(round_id: int, k: np.ndarray, local_cols: np.ndarray) -> np.ndarray:
    """What round `round_id` writes in round row k (local row 4k) and local column c of a chunk."""
    return ((round_id << ELEMENT_BITS) | (k * CHUNKS[1] + local_cols)).astype(np.uint32)


def background_value(worker: int, gen: int) -> int:
    return (worker + 1) << 28 | gen


# -- where elements are in each view ----------------------------------------------------------


def chunk_name(i: int, j: int) -> str:
    return f"chunks/c/{i}/{j}"


def npy_header_length(mountpoint: str) -> int:
    with open(os.path.join(mountpoint, "data.npy"), "rb") as f:
        major, _ = np.lib.format.read_magic(f)
        if major == 1:
            np.lib.format.read_array_header_1_0(f)
        else:
            np.lib.format.read_array_header_2_0(f)
        return f.tell()


@dataclass(frozen=True)
class View:
    """A file of the mount and where element (row, col) of the array is in it."""

    name: str  # "data", "data.npy" or "chunks/c/I/J"
    header: int = 0
    chunk: tuple[int, int] | None = None

    @property
    def kind(self) -> str:
        return "chunk" if self.chunk else ("npy" if self.header else "data")

    def positions(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        if self.chunk is None:
            return rows * SHAPE[1] + cols
        i, j = self.chunk
        return (rows - i * CHUNKS[0]) * CHUNKS[1] + (cols - j * CHUNKS[1])

    def read(self, fd: int, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """The elements at (rows, cols), with one pread of the span holding them all."""
        where = self.positions(rows, cols)
        first, last = int(where.min()), int(where.max()) + 1
        raw = os.pread(fd, (last - first) * ITEM, self.header + first * ITEM)
        assert len(raw) == (last - first) * ITEM, f"{self.name}: short read of {len(raw)} bytes"
        return np.frombuffer(raw, "<u4")[where - first]

    def write_run(self, fd: int, row: int, c0: int, values: np.ndarray) -> None:
        """One pwrite of a run of columns [c0, c0 + len(values)) of one row."""
        offset = self.header + int(self.positions(np.array([row]), np.array([c0]))[0]) * ITEM
        payload = values.astype("<u4").tobytes()
        written = os.pwrite(fd, payload, offset)
        assert written == len(payload), f"{self.name}: short write of {written} bytes"


# -- running processes under a deadline -------------------------------------------------------


def spawn() -> Any:
    return mp.get_context("spawn")


def child(target: Callable[..., dict[str, Any]], name: str, results: Any, *args: Any) -> None:
    """A child process: run `target` and put (name, result) or (name, traceback) on the queue."""
    try:
        results.put((name, target(*args), None))
    except BaseException:
        results.put((name, None, traceback.format_exc()))


def collect(mount: Mount, processes: list[Any], results: Any, names: set[str],
            timeout: float) -> dict[str, dict[str, Any]]:
    """Every child's result; a child that failed fails the test with its traceback; children
    still running after `timeout` seconds (a hang) fail it with kernel stacks, after the
    connection is aborted so that nothing stays stuck."""
    found: dict[str, dict[str, Any]] = {}
    errors: list[str] = []
    deadline = time.monotonic() + timeout
    while len(found) + len(errors) < len(names) and time.monotonic() < deadline:
        try:
            name, result, error = results.get(timeout=1.0)
        except queue.Empty:
            dead = [p for p in processes if p.exitcode not in (None, 0)]
            if dead:  # killed by a signal before it could report
                errors.append(f"{dead[0].name} died with exit code {dead[0].exitcode}")
                break
            continue
        if error is not None:
            errors.append(f"{name}:\n{error}")
            break  # the others may wait for it at a barrier: they are killed below
        else:
            found[name] = result
    if len(found) + len(errors) < len(names) and not errors:
        pids = [mount.process.pid] + [p.pid for p in processes if p.is_alive()]
        stacks = kernel_stacks(pids)
        abort_connection(fuse_connection(mount.path), mount.path)
        for p in processes:
            p.kill()
            p.join(10)
        raise AssertionError(f"processes {sorted(names - set(found))} still running {timeout:.0f} s "
                             f"after the start (a hang?); kernel stacks:\n{stacks}\n"
                             f"{mount.log()[-3000:]}")
    for p in processes:
        p.join(None if not errors else 5)
        if p.is_alive():
            p.kill()
            p.join(10)
    assert not errors, errors[0][-4000:] + "\n" + mount.log()[-2000:]
    return found


# -- the rounds ---------------------------------------------------------------------------------


@dataclass
class RoundsResult:
    counts: Counter[str] = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)


class Rounds:
    """Write-then-read rounds across the views, in the round rows (r % 4 == 0)."""

    def __init__(self, mountpoint: str, seed: int, first_round: int, count: int,
                 current: Any, tokens: Any = None) -> None:
        self.mp = mountpoint
        self.rng = random.Random(seed)
        self.first_round = first_round
        self.count = count
        self.current = current
        self.tokens = tokens
        self.header = npy_header_length(mountpoint)
        self.data = View("data")
        self.npy = View("data.npy", self.header)
        rows = np.arange(0, SHAPE[0], 4)
        self.model = initial(rows[:, None], np.arange(SHAPE[1])[None, :])  # row q is row 4q
        self.long: dict[str, int] = {}
        self.result = RoundsResult()

    def path(self, view: View) -> str:
        return os.path.join(self.mp, view.name)

    def long_fd(self, view: View) -> int:
        if view.name not in self.long:
            self.long[view.name] = os.open(self.path(view), os.O_RDWR)
        return self.long[view.name]

    def close_long(self, *views: View) -> None:
        for view in views:
            fd = self.long.pop(view.name, None)
            if fd is not None:
                os.close(fd)

    def check(self, got: np.ndarray, new: np.ndarray, round_id: int, k: np.ndarray,
              local: np.ndarray, rows: np.ndarray, cols: np.ndarray, what: str) -> None:
        """Classify one read: right, stale (no new value), torn (new and old values mixed) or
        corrupt (a value no write put there)."""
        counts = self.result.counts
        counts["reads_checked"] += 1
        counts["elements_checked"] += got.size
        is_new = got == new
        if is_new.all():
            return
        older_round = ((got >> ELEMENT_BITS) < round_id) & (got < INITIAL_MARK) & (
            (got & ((1 << ELEMENT_BITS) - 1)) == (k * CHUNKS[1] + local))
        plausible = is_new | older_round | (got == initial(rows, cols))
        if not plausible.all():
            verdict = "corrupt"
        elif not is_new.any():
            verdict = "stale"
        else:
            verdict = "torn"
        counts[verdict] += 1
        counts[f"{verdict}: {what.split(' [')[0]}"] += 1
        if len(self.result.examples) < 8:
            bad = int(np.flatnonzero(~is_new)[0])
            self.result.examples.append(
                f"{verdict} read, {what}: {int((~is_new).sum())} of {got.size} elements not "
                f"the expected ones, the first at ({int(rows[bad])}, {int(cols[bad])}): "
                f"{int(got[bad]):#010x} instead of {int(new[bad]):#010x}")

    def run(self) -> dict[str, Any]:
        for n in range(self.count):
            self.one_round(self.first_round + n)
        self.close_long(*[View(name) for name in list(self.long)])
        return {"counts": dict(self.result.counts), "examples": self.result.examples,
                "model": self.model}

    def one_round(self, round_id: int) -> None:
        rng = self.rng
        i, j = rng.randrange(GRID[0]), rng.randrange(GRID[1])
        self.current[0], self.current[1] = i, j
        for _ in range(WORKERS * BACKGROUND_PER_ROUND if self.tokens is not None else 0):
            self.tokens.release()  # the background writers' writes during this round
        chunk = View(chunk_name(i, j), chunk=(i, j))
        k0 = rng.randrange(ROUND_ROWS)
        k1 = rng.randint(k0 + 1, min(ROUND_ROWS, k0 + 4))
        if rng.random() < 0.3:
            c0, c1 = 0, CHUNKS[1]
        else:
            c0 = rng.randrange(CHUNKS[1])
            c1 = rng.randint(c0 + 1, CHUNKS[1])
        direction = rng.choice(["chunk", "data"])
        fds = rng.choice(["before", "after", "closed"])
        k = np.repeat(np.arange(k0, k1), c1 - c0)
        local = np.tile(np.arange(c0, c1), k1 - k0)
        rows = i * CHUNKS[0] + 4 * k
        cols = j * CHUNKS[1] + local
        new = round_value(round_id, k, local)
        old = self.model[rows // 4, cols]
        name = f"round {round_id}, chunk ({i}, {j}) rows {sorted(set(rows.tolist()))} " \
               f"cols [{j * CHUNKS[1] + c0}, {j * CHUNKS[1] + c1})"
        counts = self.result.counts

        # Warm the page cache of the page-cached views (and check the last round's values).
        for view in (self.data, self.npy):
            got = view.read(self.long_fd(view), rows, cols)
            self.check(got, old, round_id - 1, k, local, rows, cols,
                       f"{view.kind} read before the write [{name}]")
        if fds == "closed":
            self.close_long(self.data, self.npy)

        # The write: one pwrite per row, through one view.
        through = chunk if direction == "chunk" else self.data
        fresh_writer = fds != "before" or (direction == "chunk" and rng.random() < 0.5)
        fd = os.open(self.path(through), os.O_RDWR) if fresh_writer else self.long_fd(through)
        try:
            for kk in range(k0, k1):
                through.write_run(fd, i * CHUNKS[0] + 4 * kk, j * CHUNKS[1] + c0,
                                  new[(kk - k0) * (c1 - c0):(kk - k0 + 1) * (c1 - c0)])
        finally:
            if fresh_writer:
                os.close(fd)  # (a close after a write flushes: the chunk is written back)
        self.model[rows // 4, cols] = new
        counts[f"writes through {direction}"] += 1
        counts[f"rounds {fds}"] += 1
        counts["rounds"] += 1

        # The reads, through the other views.
        others = [v for v in (chunk, self.data, self.npy) if v is not through]
        for view in others:
            if fds == "before":
                got = view.read(self.long_fd(view), rows, cols)
            else:
                fresh = os.open(self.path(view), os.O_RDONLY)
                try:
                    got = view.read(fresh, rows, cols)
                finally:
                    os.close(fresh)
            self.check(got, new, round_id, k, local, rows, cols,
                       f"{view.kind} read after writing through {direction}, fds {fds} [{name}]")
        if fds == "closed":  # open them again for the next round
            self.long_fd(self.data)
            self.long_fd(self.npy)


def rounds_main(mountpoint: str, seed: int, first_round: int, count: int, barrier: Any,
                stop: Any, current: Any, tokens: Any) -> dict[str, Any]:
    try:
        rounds = Rounds(mountpoint, seed, first_round, count, current, tokens)
        rounds.long_fd(rounds.data)
        rounds.long_fd(rounds.npy)
        barrier.wait()
        return rounds.run()
    finally:
        stop.set()


# -- the background writers ---------------------------------------------------------------------


def background_main(mountpoint: str, worker: int, seed: int, barrier: Any, stop: Any,
                    current: Any, tokens: Any) -> dict[str, Any]:
    """Write runs of this worker's rows (r % 4 == worker + 1) through `data` until `stop`, half
    of them in the chunk the rounds are using; read each back. Each write takes a token the
    rounds hand out (BACKGROUND_PER_ROUND per process and round), so that the background
    keeps pace with the rounds instead of taking the CPU from them."""
    rng = random.Random(seed)
    rows_owned = np.arange(worker + 1, SHAPE[0], 4)
    model = initial(rows_owned[:, None], np.arange(SHAPE[1])[None, :])
    header = npy_header_length(mountpoint)
    data, npy = View("data"), View("data.npy", header)
    counts: Counter[str] = Counter()
    examples: list[str] = []
    fd = os.open(os.path.join(mountpoint, "data"), os.O_RDWR)

    def expect(got: np.ndarray, wanted: np.ndarray, what: str) -> None:
        counts["read_backs"] += 1
        if not np.array_equal(got, wanted):
            counts["mismatches"] += 1
            if len(examples) < 5:
                bad = int(np.flatnonzero(got != wanted)[0])
                examples.append(f"worker {worker}: {what}: {int((got != wanted).sum())} elements "
                                f"wrong, the first {int(got[bad]):#010x} instead of "
                                f"{int(wanted[bad]):#010x}")

    barrier.wait()
    gen = 0
    try:
        while not stop.is_set():
            if not tokens.acquire(timeout=0.1):
                continue
            gen += 1
            if rng.random() < 0.5:  # in the chunk the rounds are using now
                i, j = int(current[0]), int(current[1])
                row = i * CHUNKS[0] + 4 * rng.randrange(ROUND_ROWS) + worker + 1
                c0 = j * CHUNKS[1] + rng.randrange(CHUNKS[1])
                c1 = rng.randint(c0 + 1, (j + 1) * CHUNKS[1])
            else:
                row = int(rng.choice(rows_owned))
                c0 = rng.randrange(SHAPE[1])
                c1 = rng.randint(c0 + 1, min(SHAPE[1], c0 + 600))
            q = row // 4
            values = np.full(c1 - c0, background_value(worker, gen), np.uint32)
            data.write_run(fd, row, c0, values)
            model[q, c0:c1] = values
            counts["writes"] += 1
            rows, cols = np.full(c1 - c0, row), np.arange(c0, c1)
            expect(data.read(fd, rows, cols), values, f"data row {row} [{c0}, {c1}) read back")
            if gen % 4 == 0:  # through the other views
                j = c0 // CHUNKS[1]
                end = min(c1, (j + 1) * CHUNKS[1])
                chunk = View(chunk_name(row // CHUNKS[0], j), chunk=(row // CHUNKS[0], j))
                for view in (chunk, npy):
                    other = os.open(os.path.join(mountpoint, view.name), os.O_RDONLY)
                    try:
                        got = view.read(other, rows[: end - c0], cols[: end - c0])
                    finally:
                        os.close(other)
                    expect(got, values[: end - c0], f"{view.name} row {row} [{c0}, {end}) "
                           f"right after writing it through data")
            if gen % 64 == 0:  # now and then: write back, and close and open again
                os.fsync(fd)
                os.close(fd)
                fd = os.open(os.path.join(mountpoint, "data"), os.O_RDWR)
    finally:
        os.close(fd)
    return {"counts": dict(counts), "examples": examples, "model": model}


# -- the array --------------------------------------------------------------------------------


def create_array(root: Path) -> None:
    import zarr

    array = zarr.create_array(store=str(root), shape=SHAPE, chunks=CHUNKS, dtype="<u4",
                              fill_value=0, compressors=zarr.codecs.ZstdCodec(level=1))
    rows = np.arange(SHAPE[0])[:, None]
    array[...] = initial(rows, np.arange(SHAPE[1])[None, :])


def zarr_read(root: Path) -> np.ndarray:
    import zarr

    return np.asarray(zarr.open_array(str(root), mode="r")[...])


def run_children(tmp_path: Path, start: Callable[[Any, str, Any], tuple[list[Any], list[Any]]],
                 ) -> tuple[dict[str, Any], float]:
    """Mount a fresh array and run to the end the child processes `start(context, mountpoint,
    results)` makes (with the objects they share, which must live as long as they run:
    Process.start drops its arguments, and a semaphore collected before a spawned child
    unpickles it is gone); what each found, and the seconds it all took. The daemon must
    still answer afterwards and unmount cleanly."""
    root = tmp_path / "array.zarr"
    create_array(root)
    context = spawn()
    started = time.monotonic()
    with mounted(root, tmp_path / "mnt", [f"cache={CACHE}"]) as mount:
        results = context.Queue()
        processes, shared = start(context, str(mount.path), results)
        for p in processes:
            p.start()
        found = collect(mount, processes, results, {p.name for p in processes}, TIMEOUT)
        os.stat(mount.data)  # the daemon still answers
        assert mount.unmount() == 0, mount.log()[-3000:]
    del shared
    return found, time.monotonic() - started


def report(request: pytest.FixtureRequest, record: dict[str, Any], line: str) -> None:
    report_figures(request.config, line, record)


# -- the tests ----------------------------------------------------------------------------------


@pytest.fixture(scope="module", autouse=True)
def _totals(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if SOAK_RUNS > 1 and TOTALS:
        report(request, {"test": "coherence-totals", "runs": SOAK_RUNS, **TOTALS},
               f"coherence totals over {SOAK_RUNS} runs: {TOTALS['rounds']} rounds, "
               f"{TOTALS['reads_checked']} reads checked, {TOTALS['stale']} stale, "
               f"{TOTALS['torn']} torn, {TOTALS['corrupt']} corrupt; background: "
               f"{TOTALS['background_writes']} writes, {TOTALS['background_read_backs']} read "
               f"backs, {TOTALS['background_mismatches']} mismatches; torn reads (one reply): "
               f"{TOTALS['torn chunk_rewrites']} rewrites, {TOTALS['torn uniform_reads']} reads, "
               f"{TOTALS['torn non_uniform']} non-uniform; torn reads (many pages): "
               f"{TOTALS['torn-pages chunk_rewrites']} rewrites, "
               f"{TOTALS['torn-pages uniform_reads']} reads, "
               f"{TOTALS['torn-pages non_uniform']} non-uniform")


@pytest.mark.parametrize("run", range(SOAK_RUNS))
def test_write_then_read_across_views(tmp_path: Path, request: pytest.FixtureRequest,
                                      run: int) -> None:
    seed = BASE_SEED * 1000 + run

    def start(context: Any, mp_path: str, results: Any) -> tuple[list[Any], list[Any]]:
        barrier = context.Barrier(1 + WORKERS, timeout=120)
        stop = context.Event()
        current = context.RawArray("i", 2)
        tokens = context.Semaphore(0)
        processes = [context.Process(
            target=child, name="rounds",
            args=(rounds_main, "rounds", results, mp_path, seed, 1, ROUNDS, barrier, stop,
                  current, tokens))]
        processes += [context.Process(
            target=child, name=f"background{w}",
            args=(background_main, f"background{w}", results, mp_path, w, seed * 10 + w, barrier,
                  stop, current, tokens)) for w in range(WORKERS)]
        return processes, [barrier, stop, current, tokens]

    found, seconds = run_children(tmp_path, start)
    root = tmp_path / "array.zarr"

    counts = Counter(found["rounds"]["counts"])
    background: Counter[str] = Counter()
    examples = list(found["rounds"]["examples"])
    for w in range(WORKERS):
        background.update(found[f"background{w}"]["counts"])
        examples += found[f"background{w}"]["examples"]
    figures = {
        "rounds": counts["rounds"], "reads_checked": counts["reads_checked"],
        "stale": counts["stale"], "torn": counts["torn"], "corrupt": counts["corrupt"],
        "background_writes": background["writes"],
        "background_read_backs": background["read_backs"],
        "background_mismatches": background["mismatches"],
    }
    TOTALS.update(figures)
    report(request, {"test": "coherence", "run": run, "seed": seed, **figures,
                     "detail": dict(counts), "seconds": round(seconds, 1)},
           f"coherence run {run} (seed {seed}): {counts['rounds']} rounds "
           f"({counts['writes through chunk']} written through a chunk file, "
           f"{counts['writes through data']} through data; fds {counts['rounds before']} before / "
           f"{counts['rounds after']} after / {counts['rounds closed']} closed), "
           f"{counts['reads_checked']} reads checked: "
           f"{counts['stale']} stale, {counts['torn']} torn, {counts['corrupt']} corrupt; "
           f"background: {background['writes']} writes, {background['read_backs']} read backs, "
           f"{background['mismatches']} mismatches; {seconds:.0f} s")

    assert counts["rounds"] == ROUNDS
    bad = {name: n for name, n in counts.items() if name.split(":")[0] in ("stale", "torn", "corrupt")}
    assert not bad and background["mismatches"] == 0, (
        f"seed {seed}: {bad}, {background['mismatches']} background mismatches:\n"
        + "\n".join(examples))

    # No lost update: the store holds every row as its writer left it.
    stored = zarr_read(root)
    assert np.array_equal(stored[0::4], found["rounds"]["model"]), "the rounds' rows lost updates"
    for w in range(WORKERS):
        assert np.array_equal(stored[w + 1::4], found[f"background{w}"]["model"]), (
            f"background writer {w}'s rows lost updates")


# -- torn reads ---------------------------------------------------------------------------------


def rewriter_main(mountpoint: str, barrier: Any, stop: Any) -> dict[str, Any]:
    """Rewrite the whole of TORN_CHUNK through its chunk file, all elements = k, k = 1, 2, ..."""
    fd = os.open(os.path.join(mountpoint, chunk_name(*TORN_CHUNK)), os.O_RDWR)
    size = CHUNKS[0] * CHUNKS[1]
    try:
        assert os.pwrite(fd, np.zeros(size, "<u4").tobytes(), 0) == size * ITEM
        barrier.wait()
        k = 0
        while not stop.is_set():
            k += 1
            assert os.pwrite(fd, np.full(size, k, "<u4").tobytes(), 0) == size * ITEM
            if k % 200 == 0:
                os.fsync(fd)  # written back: the chunk is saved and may be evicted and reloaded
    finally:
        os.close(fd)
    return {"rewrites": k}


def uniform_reader_main(mountpoint: str, seed: int, reads: int, kinds: list[str], barrier: Any,
                        stop: Any) -> dict[str, Any]:
    """Read TORN_CHUNK `reads` times, in turn through each kind of read; count the reads that
    are not uniform (all elements equal)."""
    rng = random.Random(seed)
    i, j = TORN_CHUNK
    header = npy_header_length(mountpoint)
    chunk = View(chunk_name(i, j), chunk=(i, j))
    data, npy = View("data"), View("data.npy", header)
    band = np.arange(i * CHUNKS[0], (i + 1) * CHUNKS[0])
    all_rows = np.repeat(band, CHUNKS[1])
    all_cols = np.tile(np.arange(j * CHUNKS[1], (j + 1) * CHUNKS[1]), CHUNKS[0])
    long = {v.name: os.open(os.path.join(mountpoint, v.name), os.O_RDONLY)
            for v in (chunk, data, npy)}
    counts: Counter[str] = Counter()
    examples: list[str] = []
    seen: set[int] = set()

    def one_read(kind: str) -> np.ndarray:
        if kind == "chunk part":  # elements [a, b) of the chunk file, starting and ending mid-row
            a = rng.randrange(1, CHUNKS[1]) + CHUNKS[1] * rng.randrange(CHUNKS[0] - 2)
            b = rng.randrange(a + CHUNKS[1], CHUNKS[0] * CHUNKS[1])
            raw = os.pread(long[chunk.name], (b - a) * ITEM, a * ITEM)
            return np.frombuffer(raw, "<u4")
        if kind == "data one row":  # the chunk's 128 elements of one row: within one page
            r = rng.randrange(CHUNKS[0])
            part = slice(r * CHUNKS[1], (r + 1) * CHUNKS[1])
            return data.read(long[data.name], all_rows[part], all_cols[part])
        if kind == "npy one page":
            # One page of data.npy, from the last 32 elements of row r - 1 of the array to the
            # first 992 of row r: the chunk's elements of both rows (a page the daemon answers
            # from two regions of the chunk).
            r = i * CHUNKS[0] + 1 + rng.randrange(CHUNKS[0] - 1)
            first = (r - 1) * SHAPE[1] + SHAPE[1] - 32
            assert (header + first * ITEM) % 4096 == 0
            raw = np.frombuffer(os.pread(long[npy.name], 4096, header + first * ITEM), "<u4")
            return np.concatenate([raw[:32], raw[32 + j * CHUNKS[1]: 32 + SHAPE[1] - 32]])
        view = {"chunk": chunk, "data": data, "data fresh": data, "npy": npy}[kind]
        if kind == "data fresh":
            fd = os.open(os.path.join(mountpoint, view.name), os.O_RDONLY)
            try:
                return view.read(fd, all_rows, all_cols)
            finally:
                os.close(fd)
        return view.read(long[view.name], all_rows, all_cols)

    # The page of the file each element of a whole-chunk read lies in.
    pages = {kind: (view.header + view.positions(all_rows, all_cols) * ITEM) // PAGE
             for kind, view in (("data", data), ("data fresh", data), ("npy", npy))}
    barrier.wait()
    try:
        for n in range(reads):
            kind = kinds[n % len(kinds)]
            got = one_read(kind)
            counts["reads"] += 1
            counts[f"reads {kind}"] += 1
            values = np.unique(got)
            seen.update(values.tolist()[:2])
            if kind in PAGED_KINDS and len(values) != 1:
                # A read of many pages overlapping a rewrite may see it partly (the kernel
                # fills the pages from several replies, as a local file system may too); each
                # page is one reply, so each page must be one version.
                counts["multi_version"] += 1
                values = max((np.unique(got[pages[kind] == p]) for p in np.unique(pages[kind])), key=len)
            if len(values) != 1:
                counts["non_uniform"] += 1
                counts[f"non_uniform {kind}"] += 1
                if len(examples) < 8:
                    versions, number = np.unique(got, return_counts=True)
                    examples.append(f"read {n} through {kind}: {len(versions)} versions in one "
                                    f"read of {got.size} elements: " + ", ".join(
                                        f"{int(v)} x{int(c)}"
                                        for v, c in zip(versions, number, strict=True)))
    finally:
        stop.set()
        for fd in long.values():
            os.close(fd)
    return {"counts": dict(counts), "examples": examples, "versions_seen": len(seen)}


def run_torn(tmp_path: Path, request: pytest.FixtureRequest, run: int, test: str,
             kinds: list[str]) -> None:
    """The rewriter and a reader of TORN_CHUNK through `kinds`; no read may be torn."""
    seed = BASE_SEED * 1000 + run

    def start(context: Any, mp_path: str, results: Any) -> tuple[list[Any], list[Any]]:
        barrier = context.Barrier(2, timeout=120)
        stop = context.Event()
        return [
            context.Process(target=child, name="rewriter",
                            args=(rewriter_main, "rewriter", results, mp_path, barrier, stop)),
            context.Process(target=child, name="reader",
                            args=(uniform_reader_main, "reader", results, mp_path, seed,
                                  TORN_READS, kinds, barrier, stop)),
        ], [barrier, stop]

    found, seconds = run_children(tmp_path, start)
    counts = Counter(found["reader"]["counts"])
    rewrites = found["rewriter"]["rewrites"]
    figures = {"chunk_rewrites": rewrites, "uniform_reads": counts["reads"],
               "non_uniform": counts["non_uniform"], "multi_version_reads": counts["multi_version"]}
    TOTALS.update({f"{test} {name}": value for name, value in figures.items()})
    by_kind = {kind: f"{counts[f'non_uniform {kind}']}/{counts[f'reads {kind}']}" for kind in kinds}
    report(request, {"test": f"coherence-{test}", "run": run, "seed": seed, **figures,
                     "versions_seen": found["reader"]["versions_seen"], "detail": dict(counts),
                     "seconds": round(seconds, 1)},
           f"{test} run {run} (seed {seed}): {rewrites} whole-chunk rewrites while "
           f"{counts['reads']} reads ran ({found['reader']['versions_seen']} versions seen): "
           f"{counts['non_uniform']} non-uniform (non-uniform/reads by kind: {by_kind}); "
           f"{counts['multi_version']} reads of many pages saw a rewrite partly; "
           f"{seconds:.0f} s")
    assert counts["reads"] == TORN_READS
    assert counts["non_uniform"] == 0, (
        f"seed {seed}: {counts['non_uniform']} of {TORN_READS} reads mixed versions of one chunk:\n"
        + "\n".join(found["reader"]["examples"]))
    assert found["reader"]["versions_seen"] > 1, "the reads never saw the chunk change"


@pytest.mark.parametrize("run", range(SOAK_RUNS))
def test_whole_chunk_rewrites_are_never_torn(tmp_path: Path, request: pytest.FixtureRequest,
                                             run: int) -> None:
    """Reads the daemon answers in one reply: the chunk file (direct_io; all of it, or a range
    starting and ending mid-row, which the daemon reads as three regions of the chunk), one
    row of the chunk through `data` (within one page) and one page of `data.npy` (holding
    the chunk's elements of two rows)."""
    run_torn(tmp_path, request, run, "torn",
             ["chunk", "chunk part", "data one row", "npy one page"])


@pytest.mark.parametrize("run", range(SOAK_RUNS))
def test_whole_chunk_rewrites_are_never_torn_in_reads_of_many_pages(
        tmp_path: Path, request: pytest.FixtureRequest, run: int) -> None:
    """One pread of the chunk's 64 rows (64 pages, 256 KiB) through `data` (long-lived fd or
    fresh open) and through `data.npy`: the kernel fills those pages from several requests,
    and keeps the ones it has, so a read overlapping a rewrite may see it partly (counted and
    reported); every page of it is one reply, hence one version of the chunk (asserted)."""
    run_torn(tmp_path, request, run, "torn-pages", ["data", "data fresh", "npy"])


# -- writes through `data` and `data.npy` at once ----------------------------------------------

HANG_TIMEOUT = 15.0
CROSS_WRITES = 300


def cross_writer_main(mountpoint: str, through: str, row: int, barrier: Any) -> dict[str, Any]:
    """Write 4 elements of `row` through `through` (data or data.npy) CROSS_WRITES times, then
    read the last write back through the other view. (Not each write: a read would bring the
    page into the cache, and the hang needs writes into pages the kernel does not have.)"""
    header = npy_header_length(mountpoint)
    views = {"data": View("data"), "data.npy": View("data.npy", header)}
    mine, other = views[through], views["data.npy" if through == "data" else "data"]
    fd = os.open(os.path.join(mountpoint, mine.name), os.O_RDWR)
    reader = os.open(os.path.join(mountpoint, other.name), os.O_RDONLY)
    rows, cols = np.full(4, row), np.arange(4)
    mismatches = 0
    barrier.wait()
    try:
        for n in range(CROSS_WRITES):
            values = np.full(4, row << 16 | n, np.uint32)
            mine.write_run(fd, row, 0, values)
        mismatches += int(not np.array_equal(other.read(reader, rows, cols), values))
    finally:
        os.close(fd)
        os.close(reader)
    return {"writes": CROSS_WRITES, "mismatches": mismatches}


def test_writes_through_data_and_data_npy_at_once(tmp_path: Path,
                                                  request: pytest.FixtureRequest) -> None:
    """Two processes write at once, one through `data` (elements 0-3 of row 0), the other
    through `data.npy` (elements 0-3 of row 2: other elements, another page), 16 bytes a
    write, 300 writes each. Both must finish (within HANG_TIMEOUT s; they take about one), and
    read their last write back through the other view."""
    root = tmp_path / "array.zarr"
    create_array(root)
    context = spawn()
    started = time.monotonic()
    with mounted(root, tmp_path / "mnt", [f"cache={CACHE}"]) as mount:
        barrier = context.Barrier(2, timeout=120)
        results = context.Queue()
        processes = [
            context.Process(target=child, name=through,
                            args=(cross_writer_main, through, results, str(mount.path), through,
                                  row, barrier))
            for through, row in (("data", 0), ("data.npy", 2))
        ]
        for p in processes:
            p.start()
        found: dict[str, dict[str, Any]] = {}
        try:
            found = collect(mount, processes, results, {"data", "data.npy"}, HANG_TIMEOUT)
        finally:
            seconds = time.monotonic() - started
            report(request, {"test": "coherence-cross-writes", "finished": bool(found),
                             **{f"{name} {k}": v for name, got in found.items()
                                for k, v in got.items()}, "seconds": round(seconds, 1)},
                   f"writes through data and data.npy at once: "
                   f"{'finished: ' + str(found) if found else 'HUNG'} after {seconds:.0f} s")
        assert mount.unmount() == 0, mount.log()[-3000:]
    assert found["data"]["mismatches"] == found["data.npy"]["mismatches"] == 0, found
