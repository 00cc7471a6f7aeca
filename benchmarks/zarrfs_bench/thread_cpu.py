"""Where a zarrfs write's time goes, sampled from /proc while it runs: the CPU of the daemon's
request path (its main thread and the threads with no name of their own: pyfuse3's loop and
the request threads that copy each write into the cache), of its encoders (the write-back's,
the early stores' and the loaders' threads, which the daemon names `zarrfs-write_N`,
`zarrfs-early_N`, `zarrfs-decode_N`, and its decoding processes), and how much of the wall
time the two made progress at once.

Every SAMPLE_SECONDS each thread's time on a CPU (`schedstat`, in ns) is read through
descriptors kept open (a read costs a few microseconds: sampling 41 threads takes 3% of a
core). A sample is busy for a side when that side ran at least BUSY_SHARE of a core over it;
`overlap` is the share of the wall time busy for both sides, `requests_alone` and
`encoders_alone` the shares busy for one side only."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from dataclasses import dataclass, field

SAMPLE_SECONDS = 0.005
BUSY_SHARE = 0.25
ENCODER_THREADS = ("zarrfs-write", "zarrfs-early", "zarrfs-decode")
NEW_TASKS_EVERY = 20  # samples between looks for threads and processes started since


@dataclass
class Shares:
    """What one run spent: CPU seconds by side and by process, and shares of its wall time."""

    requests: float = 0.0
    encoders: float = 0.0
    processes: dict[int, float] = field(default_factory=dict)  # each decoding process's CPU
    wall: float = 0.0
    overlap: float = 0.0
    requests_alone: float = 0.0
    encoders_alone: float = 0.0


class _Task:
    def __init__(self, path: str, encoder: bool, process: int | None, new: bool) -> None:
        """`new`: started during the run (all its CPU counts)."""
        self.fd = os.open(path, os.O_RDONLY)
        self.encoder = encoder
        self.process = process  # (a decoding process's pid; None: a thread of the daemon)
        self.last = 0 if new else self.ns()

    def ns(self) -> int:
        with contextlib.suppress(OSError, ValueError):
            return int(os.pread(self.fd, 64, 0).split()[0])
        return 0


class ThreadSampler:
    """Samples the daemon `pid` and its decoding processes `processes` while entered."""

    def __init__(self, pid: int, processes: list[int]) -> None:
        self._pid = pid
        self._processes = processes
        self._tasks: dict[str, _Task] = {}
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="thread-sampler", daemon=True)
        self.shares = Shares()

    def __enter__(self) -> ThreadSampler:
        self._look_for_tasks(new=False)
        self._started = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()
        self.shares.wall = time.monotonic() - self._started
        for share in ("overlap", "requests_alone", "encoders_alone"):
            setattr(self.shares, share, getattr(self.shares, share) / max(self.shares.wall, 1e-9))
        for task in self._tasks.values():
            os.close(task.fd)

    def _look_for_tasks(self, new: bool = True) -> None:
        for pid in [self._pid, *self._processes]:
            with contextlib.suppress(OSError):
                for tid in os.listdir(f"/proc/{pid}/task"):
                    path = f"/proc/{pid}/task/{tid}/schedstat"
                    if path in self._tasks:
                        continue
                    with contextlib.suppress(OSError):
                        with open(f"/proc/{pid}/task/{tid}/comm") as comm:
                            name = comm.read().strip()
                        process = None if pid == self._pid else pid
                        encoder = process is not None or name.startswith(ENCODER_THREADS)
                        self._tasks[path] = _Task(path, encoder, process, new)

    def _run(self) -> None:
        shares, samples, last = self.shares, 0, time.monotonic()
        while not self._done.wait(SAMPLE_SECONDS):
            now = time.monotonic()
            spent = {False: 0, True: 0}
            for task in list(self._tasks.values()):
                ns = task.ns()
                grew, task.last = max(ns - task.last, 0), ns
                spent[task.encoder] += grew
                if task.process is not None:
                    shares.processes[task.process] = shares.processes.get(task.process, 0.0) + grew / 1e9
            interval = now - last
            busy_requests = spent[False] / 1e9 >= BUSY_SHARE * interval
            busy_encoders = spent[True] / 1e9 >= BUSY_SHARE * interval
            shares.requests += spent[False] / 1e9
            shares.encoders += spent[True] / 1e9
            shares.overlap += interval if busy_requests and busy_encoders else 0.0
            shares.requests_alone += interval if busy_requests and not busy_encoders else 0.0
            shares.encoders_alone += interval if busy_encoders and not busy_requests else 0.0
            last, samples = now, samples + 1
            if samples % NEW_TASKS_EVERY == 0:
                self._look_for_tasks()
