"""The per-chunk and per-shard locks (zarrfs.array.cache.KeyedLocks): a thread holding one
shard's lock, as a GET of that shard does for as long as the network takes, makes no thread
wait that wants another shard; the same shard is still one thread at a time; and no lock
outlives its users, whatever the number of shards."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from zarrfs.array.cache import KeyedLocks

pytestmark = pytest.mark.fast

WAIT = 5.0  # seconds: far more than any step here takes, so a miss means a thread was blocked


def test_holding_one_key_blocks_no_other_key() -> None:
    locks = KeyedLocks()
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with locks((0, 0)):
            held.set()
            release.wait()  # (set in `finally`, whatever happens)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(WAIT)
        # Far more keys than a striped set has locks: with stripes some would wait for (0, 0).
        others = [(i, j) for i in range(40) for j in range(25) if (i, j) != (0, 0)]
        taken: list[tuple[int, int]] = []

        def take_all() -> None:
            for key in others:
                with locks(key):
                    taken.append(key)

        taker = threading.Thread(target=take_all)
        taker.start()
        taker.join(WAIT)
        assert not taker.is_alive(), f"blocked after {len(taken)} of {len(others)} other keys"
        assert taken == others
        assert len(locks) == 1  # only the held key
    finally:
        release.set()
        holder.join()
    assert len(locks) == 0


def test_one_key_is_one_thread_at_a_time() -> None:
    locks = KeyedLocks()
    inside = 0
    most = 0
    count_lock = threading.Lock()
    entered = threading.Barrier(8, timeout=WAIT)

    def use(_: int) -> None:
        nonlocal inside, most
        entered.wait()  # all eight ask at once
        for _ in range(200):
            with locks((3, 4)):
                with count_lock:
                    inside += 1
                    most = max(most, inside)
                with count_lock:
                    inside -= 1

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(use, range(8)))
    assert most == 1
    assert len(locks) == 0


def test_an_error_inside_still_lets_the_lock_go() -> None:
    locks = KeyedLocks()
    try:
        with locks((1,)):
            raise ValueError("inside")
    except ValueError:
        pass
    assert len(locks) == 0
    with locks((1,)):  # (not left held)
        assert len(locks) == 1
