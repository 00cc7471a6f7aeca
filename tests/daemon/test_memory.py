"""Giving freed memory back (zarrfs.daemon.memory): the trimmer runs while the mount is busy and
sleeps longer and longer while it is idle; a trim returns freed heap buffers to the system."""

from __future__ import annotations

import itertools
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from tests.helpers.mounting import wait_until
from zarrfs.array.cache import Counters
from zarrfs.daemon import memory
from zarrfs.daemon.memory import Trimmer

pytestmark = pytest.mark.fast


class _Calls:
    """A trim function and an activity counter for a Trimmer, counting how often it looks."""

    def __init__(self) -> None:
        self.activity = 0
        self.trims = 0
        self.looks = 0
        self.freed_bytes = 0  # what the cache let go so far
        self.lock = threading.Lock()

    def trim(self) -> int:
        with self.lock:
            self.trims += 1
        return 1

    def freed(self) -> int:
        return self.freed_bytes

    def seen_activity(self) -> int:
        with self.lock:
            self.looks += 1
        return self.activity

    def looked(self, times: int) -> None:
        """Wait until the trimmer has looked at the activity `times` more times."""
        with self.lock:
            target = self.looks + times
        wait_until(lambda: self.looks >= target, what=f"the trimmer looking {times} times")


def test_trims_follow_activity_and_stop_when_idle() -> None:
    calls = _Calls()
    trimmer = Trimmer(calls.trim, calls.seen_activity, calls.freed, interval=0.01)
    try:
        calls.looked(4)
        assert calls.trims == 0, "an idle mount was trimmed"
        calls.activity += 1
        wait_until(lambda: calls.trims >= 1, what="a trim after activity")
        settled = calls.trims
        calls.looked(4)
        assert calls.trims == settled == 1, "trims went on once the mount was idle"
    finally:
        trimmer.stop()


def test_memory_freed_is_given_back_before_the_interval_ends() -> None:
    """A random writer's cache lets chunk buffers go faster than a trim every 0.1 s gave them
    back (issue 95): once the cache freed FREED_BYTES, the trim comes within
    FREED_CHECK_SECONDS, whatever the interval."""
    calls = _Calls()
    trimmer = Trimmer(calls.trim, calls.seen_activity, calls.freed, interval=60.0)
    try:
        calls.freed_bytes += memory.FREED_BYTES - 1
        time.sleep(0.1)  # not a synchronization: a trim that came now would be too early
        assert calls.trims == 0, "trimmed before the cache had freed enough"
        calls.freed_bytes += 1
        wait_until(lambda: calls.trims == 1, what="a trim once the cache freed FREED_BYTES")
    finally:
        trimmer.stop()


def test_an_idle_trimmer_looks_less_often(monkeypatch: pytest.MonkeyPatch) -> None:
    looks: list[float] = []
    calls = _Calls()

    def activity() -> int:
        looks.append(time.monotonic())
        return calls.activity

    monkeypatch.setattr(memory, "IDLE_SECONDS", 0.08)
    trimmer = Trimmer(calls.trim, activity, calls.freed, interval=0.01)
    time.sleep(0.6)  # not a synchronization: the test counts the looks in this much time
    trimmer.stop()
    gaps = [b - a for a, b in itertools.pairwise(looks)]
    # Every 0.01 s that would be about 60 looks; backing off to 0.08 s, about 10.
    assert 4 <= len(gaps) < 20, f"idle looks did not back off: {gaps}"
    assert min(gaps[-2:]) >= 0.07, f"idle looks did not back off: {gaps}"


def test_stop_returns_promptly_while_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    # Backed off 7 times from 0.01 s, an idle trimmer waits 1.28 s before its next look:
    # a stop that waited for that look would take longer than the bound below.
    monkeypatch.setattr(memory, "IDLE_SECONDS", 2.0)
    calls = _Calls()
    trimmer = Trimmer(calls.trim, calls.seen_activity, calls.freed, interval=0.01)
    calls.looked(7)
    started = time.monotonic()
    trimmer.stop()
    assert time.monotonic() - started < 1.0


def test_a_trim_returns_freed_buffers_to_the_system() -> None:
    # In a child: the malloc settings are the process's own. Buffers of 1 MiB (chunk-sized,
    # from the heap) with a small live buffer after each, so freeing them leaves holes that
    # glibc keeps resident until trimmed.
    script = textwrap.dedent("""
        import numpy as np
        from zarrfs.daemon.memory import bound_malloc
        trim = bound_malloc()
        assert trim is not None, "not glibc"
        def rss():
            return int(open("/proc/self/status").read().split("VmRSS:")[1].split()[0]) >> 10
        big, small = [], []
        for _ in range(200):
            big.append(np.ones(1 << 20, dtype=np.uint8))
            small.append(np.ones(64 << 10, dtype=np.uint8))
        before = rss()
        del big
        freed = rss()
        trim()
        print(before, freed, rss())
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    before, freed, trimmed = map(int, done.stdout.split())
    assert freed > before - 50, f"glibc returned the holes without a trim ({before} -> {freed} MiB)"
    assert trimmed < freed - 150, f"a trim did not return the freed buffers ({freed} -> {trimmed} MiB)"


def test_a_mounts_activity_grows_with_requests_and_with_chunks_coded_between_them() -> None:
    """A flush encodes for a while with no request coming in: the trimmer must keep trimming."""
    counters = Counters()
    seen = [counters.activity()]
    for work in ({"requests": 1}, {"chunks_encoded": 1}, {"chunks_decoded": 1}):
        counters.add(**work)
        seen.append(counters.activity())
    counters.add(bytes_stored=4096, cache_hits=3)  # (bookkeeping, not work of its own)
    assert seen == sorted(set(seen)) and len(seen) == 4
    assert counters.activity() == seen[-1]
