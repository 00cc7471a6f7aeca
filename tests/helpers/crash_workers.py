"""The workers of the crash tests' storm (tests/reliability/test_crash_storm.py), run as a
script (`python crash_workers.py PLAN_JSON`): each writes runs of elements through `data` and
through chunk files, logging each write before making it and, after an fsync or close
returns, that every write before it is durable; then the judge of what the store holds after
the daemon was stopped, from those logs.

Every element a worker writes encodes (worker, write number, element index), so any value
found later names the write it came from.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import sys
import time
from array import array as machine_array
from dataclasses import dataclass
from pathlib import Path

import numpy as np

WORKERS = 4
SHAPE = (128, 256)


SHARED_ROWS = range(120, 128)  # written by every worker; the other rows each have one owner
WORKER_SECONDS = 30.0  # a worker gives up after this long even if the daemon lives on


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


if __name__ == "__main__":
    fields = json.loads(sys.argv[1])
    fields["file_shape"] = tuple(fields["file_shape"])
    run_worker(Plan(**fields))
