"""Eight processes read and write one mounted array at the same time, with a small cache.

The array is 128 MiB (uint32, 8192 x 4096, chunks of 256 x 512 = 512 KiB, zstd), mounted with
cache=32M, so chunks are evicted and reloaded all the time. Its rows are in three parts:

* rows 0-2047: row r belongs to process r % 8, which alone writes it (pwrite through `data`,
  element-aligned or not; pwrite through chunk files; shared mmap + msync), so every chunk
  there is written by all eight processes at once, each in its own rows;
* rows 2048-2303: every process writes there (element-aligned runs through `data` or chunk
  files), each value naming (process, write number);
* rows 2304-8191: only read.

Every process also reads random ranges of `data` and of chunk files, and checks what it reads:
its own rows equal its own model of them (read-your-writes, also right after a write through
the other file showing the same elements), the read-only rows their initial
values, the shared rows an initial value or one some process wrote. It fsyncs and closes and
reopens its files now and then. After the time is up (10 s; ZARRFS_SOAK=N makes it N s):

* every process finished before a timeout (no deadlock), and the daemon still answers;
* each process's rows hold exactly its last writes (no lost update), through the mount and,
  after unmounting, in the store as TensorStore reads it;
* each shared element holds its initial value or a value a write that covered it put there;
* the daemon's peak RSS (VmHWM) stayed within the cache limit + 150 MiB.

    ZARRFS_SOAK=300 .venv/bin/pytest tests/reliability/test_concurrency.py

The operations run and the daemon's peak RSS are printed at the end and, when ZARRFS_STATS
names a file, appended to it as one JSON line.
"""

from __future__ import annotations

import json
import mmap
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.concurrency_array import (
    CACHE,
    CHUNKS,
    ITEM,
    OWNED_END,
    PROCESSES,
    ROW_BYTES,
    RSS_MARGIN,
    SECONDS,
    SHAPE,
    SHARED_END,
    check_final,
    create_array,
    initial,
    memory,
    read_mount,
    tensorstore_read,
    written_value,
)
from tests.helpers.figures import report_figures
from tests.helpers.mounting import abort_connection, fuse_connection, kernel_stacks, mounted

pytestmark = pytest.mark.skipif(
    not os.path.exists("/dev/fuse") or shutil.which("fusermount3") is None,
    reason="needs FUSE (/dev/fuse and fusermount3)",
)


HERE = Path(__file__).resolve().parent
TESTS = HERE.parent


STATS: Counter[str] = Counter()


# -- a process (this file run as a script) ----------------------------------------------------


@dataclass(frozen=True)
class Plan:
    mountpoint: str
    process: int
    seed: int
    seconds: float
    out: str  # where the process leaves its model, shared-row log and counters


class Worker:
    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.p = plan.process
        self.rng = random.Random(plan.seed)
        self.own_rows = np.arange(self.p, OWNED_END, PROCESSES)
        # The process's model of its own rows (row k of it is array row k * PROCESSES + p).
        self.model = initial(self.own_rows[:, None], np.arange(SHAPE[1])[None, :])
        self.shared_log: list[tuple[int, int, int, int]] = []  # (gen, row, c0, c1)
        self.gen = 0
        self.files: dict[str, int] = {}
        self.dirty: set[str] = set()
        self.counts: Counter[str] = Counter()

    # -- files -------------------------------------------------------------------------------

    def fd(self, name: str) -> int:
        if name not in self.files:
            self.files[name] = os.open(os.path.join(self.plan.mountpoint, name), os.O_RDWR)
        return self.files[name]

    @staticmethod
    def chunk_name(i: int, j: int) -> str:
        return f"chunks/c/{i}/{j}"

    def close_all(self) -> None:
        while self.files:
            os.close(self.files.popitem()[1])
        self.dirty.clear()

    # -- writes ------------------------------------------------------------------------------

    def _run(self, row: int) -> tuple[int, int, str, int]:
        """A run [c0, c1) of `row`, and where it is written: (c0, c1, file, byte offset)."""
        if self.rng.random() < 0.5:
            c0 = self.rng.randrange(SHAPE[1])
            c1 = self.rng.randint(c0 + 1, min(SHAPE[1], c0 + 3000))
            return c0, c1, "data", (row * SHAPE[1] + c0) * ITEM
        j = self.rng.randrange(SHAPE[1] // CHUNKS[1])
        c0 = self.rng.randrange(j * CHUNKS[1], (j + 1) * CHUNKS[1])
        c1 = self.rng.randint(c0 + 1, (j + 1) * CHUNKS[1])
        local = (row % CHUNKS[0]) * CHUNKS[1] + c0 - j * CHUNKS[1]
        return c0, c1, self.chunk_name(row // CHUNKS[0], j), local * ITEM

    def write_own(self, read_back: bool = False) -> None:
        """A run of one of our rows; a third of them not element-aligned at either end. With
        `read_back`, the run is read back at once through the other file showing it."""
        self.gen += 1
        k = self.rng.randrange(len(self.own_rows))
        row = int(self.own_rows[k])
        c0, c1, name, offset = self._run(row)
        image = np.full(c1 - c0, written_value(self.p, self.gen), "<u4").view(np.uint8)
        head = tail = 0
        if self.rng.random() < 0.33 and len(image) > 8:
            head, tail = self.rng.randrange(4), self.rng.randrange(4)
        payload = image[head : len(image) - tail]
        written = os.pwrite(self.fd(name), payload.tobytes(), offset + head)
        assert written == len(payload), f"short write: {written} of {len(payload)} bytes"
        self.model[k].view(np.uint8)[c0 * ITEM + head : c1 * ITEM - tail] = payload
        self.dirty.add(name)
        self.counts["writes"] += 1
        if read_back:
            self.read_back(k, row, c0, c1, name)

    def read_back(self, k: int, row: int, c0: int, c1: int, written_through: str) -> None:
        if written_through == "data":
            j = c0 // CHUNKS[1]
            c1 = min(c1, (j + 1) * CHUNKS[1])
            local = (row % CHUNKS[0]) * CHUNKS[1] + c0 - j * CHUNKS[1]
            name, offset = self.chunk_name(row // CHUNKS[0], j), local * ITEM
        else:
            name, offset = "data", (row * SHAPE[1] + c0) * ITEM
        got = np.frombuffer(os.pread(self.fd(name), (c1 - c0) * ITEM, offset), "<u4")
        self._expect(got == self.model[k, c0:c1], f"{name} [{offset}:+{(c1 - c0) * ITEM}] "
                     f"right after writing it through {written_through}", "our own rows",
                     got, self.model[k, c0:c1])
        self.counts["read_backs"] += 1

    def write_shared(self) -> None:
        self.gen += 1
        row = self.rng.randrange(OWNED_END, SHARED_END)
        c0, c1, name, offset = self._run(row)
        payload = np.full(c1 - c0, written_value(self.p, self.gen), "<u4").tobytes()
        self.shared_log.append((self.gen, row, c0, c1))  # before: it may land, then fail
        assert os.pwrite(self.fd(name), payload, offset) == len(payload)
        self.dirty.add(name)
        self.counts["shared_writes"] += 1

    def mmap_own(self) -> None:
        """Our rows are whole pages of `data` (16 KiB each): write one through a mapping."""
        self.gen += 1
        k = self.rng.randrange(len(self.own_rows))
        row = int(self.own_rows[k])
        c0 = self.rng.randrange(SHAPE[1])
        c1 = self.rng.randint(c0 + 1, SHAPE[1])
        payload = np.full(c1 - c0, written_value(self.p, self.gen), "<u4").tobytes()
        with mmap.mmap(self.fd("data"), ROW_BYTES, offset=row * ROW_BYTES) as mapped:
            mapped[c0 * ITEM : c1 * ITEM] = payload
            mapped.flush()
        self.model[k, c0:c1] = written_value(self.p, self.gen)
        self.dirty.add("data")
        self.counts["mmap_writes"] += 1

    # -- reads -------------------------------------------------------------------------------

    def read_and_check(self) -> None:
        """Read a random range of `data` or of a chunk file and check every element."""
        if self.rng.random() < 0.5:
            total = SHAPE[0] * SHAPE[1]
            first = self.rng.randrange(total)
            last = min(total, first + self.rng.randint(1, 16384))
            raw = os.pread(self.fd("data"), (last - first) * ITEM, first * ITEM)
            flat = np.arange(first, last)
            rows, cols = flat // SHAPE[1], flat % SHAPE[1]
            where = f"data elements [{first}, {last})"
        else:
            i = self.rng.randrange(SHAPE[0] // CHUNKS[0])
            j = self.rng.randrange(SHAPE[1] // CHUNKS[1])
            size = CHUNKS[0] * CHUNKS[1]
            first = self.rng.randrange(size)
            last = min(size, first + self.rng.randint(1, 16384))
            name = self.chunk_name(i, j)
            raw = os.pread(self.fd(name), (last - first) * ITEM, first * ITEM)
            local = np.arange(first, last)
            rows = i * CHUNKS[0] + local // CHUNKS[1]
            cols = j * CHUNKS[1] + local % CHUNKS[1]
            where = f"{name} elements [{first}, {last})"
        values = np.frombuffer(raw, "<u4")
        assert len(values) == len(rows), f"{where}: short read of {len(raw)} bytes"
        ours = (rows < OWNED_END) & (rows % PROCESSES == self.p)
        expected = self.model[rows[ours] // PROCESSES, cols[ours]]
        self._expect(values[ours] == expected, where, "our own rows", values[ours], expected)
        read_only = rows >= SHARED_END
        expected = initial(rows[read_only], cols[read_only])
        self._expect(values[read_only] == expected, where, "read-only rows",
                     values[read_only], expected)
        shared = (rows >= OWNED_END) & ~read_only
        owner = values[shared] >> 28
        plausible = (values[shared] == initial(rows[shared], cols[shared])) | (
            (owner >= 1) & (owner <= PROCESSES))
        self._expect(plausible, where, "shared rows", values[shared], None)
        self.counts["reads"] += 1
        self.counts["elements_checked"] += int(ours.sum() + read_only.sum() + shared.sum())

    def _expect(self, ok: np.ndarray, where: str, part: str, got: np.ndarray,
                expected: np.ndarray | None) -> None:
        if ok.all():
            return
        bad = int(np.flatnonzero(~ok)[0])
        wanted = "" if expected is None else f", expected {int(expected[bad]):#010x}"
        raise AssertionError(f"process {self.p}: {where}, {part}: {int((~ok).sum())} elements "
                             f"wrong, the first {int(got[bad]):#010x}{wanted}")

    # -- the loop ----------------------------------------------------------------------------

    def run(self) -> None:
        deadline = time.monotonic() + self.plan.seconds
        operations = [
            (0.20, self.write_own), (0.10, lambda: self.write_own(read_back=True)),
            (0.10, self.write_shared), (0.05, self.mmap_own),
            (0.45, self.read_and_check), (0.06, self.fsync), (0.04, self.close_all),
        ]
        weights = [w for w, _ in operations]
        while time.monotonic() < deadline:
            self.rng.choices(operations, weights)[0][1]()
            self.counts["operations"] += 1
        self.close_all()  # close() returns once our writes are stored
        out = Path(self.plan.out)
        np.save(out.with_suffix(".model.npy"), self.model)
        shared = np.array(self.shared_log, dtype=np.int64).reshape(-1, 4)
        np.save(out.with_suffix(".shared.npy"), shared)
        out.with_suffix(".json").write_text(json.dumps(self.counts))

    def fsync(self) -> None:
        for name in sorted(self.dirty):
            os.fsync(self.files[name])
        self.dirty.clear()
        self.counts["fsyncs"] += 1


# -- the test ---------------------------------------------------------------------------------


@pytest.fixture(scope="module", autouse=True)
def _print_figures(request: pytest.FixtureRequest) -> Iterator[None]:
    started = time.monotonic()
    yield
    seconds = time.monotonic() - started
    report_figures(request.config,
            f"concurrency: {PROCESSES} processes for {SECONDS} s: {STATS['operations']} "
            f"operations ({STATS['writes']} writes, {STATS['shared_writes']} to shared rows, "
            f"{STATS['mmap_writes']} through mmap, {STATS['reads']} checked reads, "
            f"{STATS['read_backs']} read back through the other file, "
            f"{STATS['fsyncs']} fsyncs); daemon peak RSS {STATS['vm_hwm'] >> 20} MiB "
            f"(limit {(CACHE + RSS_MARGIN) >> 20} MiB); {seconds:.0f} s",
            {"test": "concurrency", **STATS, "seconds": round(seconds, 1)})


def test_eight_processes_share_one_mount(tmp_path: Path) -> None:
    root = tmp_path / "array.zarr"
    create_array(root)
    out = tmp_path / "out"
    out.mkdir()
    seed = int(os.environ.get("ZARRFS_SEED", time.time_ns() % (1 << 32)))
    with mounted(root, tmp_path / "mnt", [f"cache={CACHE >> 20}M"]) as mount:
        pid = mount.process.pid
        connection = fuse_connection(mount.path)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), str(TESTS.parent)])}
        processes = [
            subprocess.Popen(
                [sys.executable, __file__, json.dumps(asdict(Plan(
                    str(mount.path), p, seed * 100 + p, SECONDS, str(out / f"process{p}"))))],
                env=env, stderr=subprocess.PIPE)
            for p in range(PROCESSES)
        ]
        peak_rss = 0
        deadline = time.monotonic() + SECONDS + 90
        while any(p.poll() is None for p in processes) and time.monotonic() < deadline:
            peak_rss = max(peak_rss, memory(pid).get("VmRSS", 0))
            time.sleep(0.2)
        if any(p.poll() is None for p in processes):
            stacks = kernel_stacks([pid] + [p.pid for p in processes if p.poll() is None])
            abort_connection(connection, mount.path)
            for p in processes:
                p.kill()
                p.communicate()
            raise AssertionError(f"processes still running {SECONDS + 90} s after the start "
                                 f"(deadlock?); kernel stacks:\n{stacks}\n{mount.log()[-3000:]}")
        failures = [p.communicate()[1].decode(errors="replace") for p in processes
                    if p.returncode != 0]
        assert not failures, failures[0][-3000:]
        for p in range(PROCESSES):
            STATS.update(json.loads((out / f"process{p}.json").read_text()))
        check_final(read_mount(mount), out, "through the mount")
        usage = memory(pid)
        STATS["vm_hwm"] = usage["VmHWM"]
        STATS["peak_rss_sampled"] = peak_rss
        assert mount.unmount() == 0, mount.log()[-3000:]
    check_final(tensorstore_read(root), out, "in the store after unmounting")
    assert usage["VmHWM"] <= CACHE + RSS_MARGIN, (
        f"the daemon's peak RSS was {usage['VmHWM'] >> 20} MiB with cache={CACHE >> 20}M")


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    Worker(Plan(**json.loads(sys.argv[1]))).run()
