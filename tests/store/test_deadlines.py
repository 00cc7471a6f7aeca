"""A wait for the store is bounded by its silence, not by its length (`-o timeout=`): requests
to a store that answers slowly are waited for past the timeout, a silent store fails them
within it. Without a mount: the batch of GETs (`each_answered`) and a FUSE request's wait for
its worker (`Workers`)."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable

import pytest
import trio

from zarrfs.errors import StoreError
from zarrfs.fuse.workers import Workers
from zarrfs.store.deadline import Answers, each_answered

pytestmark = pytest.mark.fast

TIMEOUT = 0.4


async def answer_after(seconds: float, value: int) -> int:
    await asyncio.sleep(seconds)
    return value


def test_a_batch_answering_in_turn_outlasts_its_timeout() -> None:
    answers = Answers()
    requests = [answer_after(0.25 * (i + 1), i) for i in range(6)]  # 1.5 s in all, 0.25 s apart
    started = time.monotonic()
    found = asyncio.run(each_answered(requests, TIMEOUT, answers.mark))
    assert found == list(range(6))
    assert time.monotonic() - started > 3 * TIMEOUT
    assert answers.silence() < TIMEOUT


def test_a_batch_fails_when_none_answers_within_its_timeout() -> None:
    requests = [answer_after(0.1, 0), answer_after(60, 1)]
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        asyncio.run(each_answered(requests, TIMEOUT, lambda: None))
    assert time.monotonic() - started < 0.1 + TIMEOUT + 5  # (not the silent request's 60 s)


def test_a_request_results_and_errors_keep_their_places() -> None:
    async def refused() -> int:
        raise ConnectionRefusedError("no")

    found = asyncio.run(each_answered([answer_after(0.05, 7), refused()], TIMEOUT, lambda: None))
    assert found[0] == 7 and isinstance(found[1], ConnectionRefusedError)


async def serve_one(workers: Workers, work: Callable[[], None]) -> StoreError | None:
    """A request whose worker does `work`, with the deadlines kept as a mount keeps them: the
    error it failed with (None: it was answered)."""
    failed: list[StoreError] = []

    async def request(nursery: trio.Nursery) -> None:
        try:
            await workers.run(work)
        except StoreError as e:
            failed.append(e)
        nursery.cancel_scope.cancel()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(workers.keep_deadlines)
        nursery.start_soon(request, nursery)
    return failed[0] if failed else None


def test_a_request_waits_past_the_timeout_while_the_store_answers() -> None:
    timeouts: list[int] = []
    workers = Workers(TIMEOUT, lambda: timeouts.append(1), silence=lambda: 0.0)
    assert trio.run(serve_one, workers, functools.partial(time.sleep, 4 * TIMEOUT)) is None
    assert timeouts == []


def test_a_request_fails_within_the_timeout_of_a_silent_store() -> None:
    timeouts: list[int] = []
    workers = Workers(TIMEOUT, lambda: timeouts.append(1), silence=lambda: 10 * TIMEOUT)
    started = time.monotonic()
    failed = trio.run(serve_one, workers, functools.partial(time.sleep, 10 * TIMEOUT))
    assert failed is not None and "no answer from the store" in str(failed)
    assert time.monotonic() - started < 8 * TIMEOUT  # (the worker itself sleeps 10)
    assert timeouts == [1]


# The three below take a timeout of 2 s, so that a loaded machine's scheduling (tenths of a
# second) stays well inside their margins.


def kept_by_answers(timeout: float) -> tuple[Answers, list[int], Workers]:
    """A store's answers, the timeouts counted, and workers whose deadlines follow them."""
    answers, timeouts = Answers(), []
    return answers, timeouts, Workers(timeout, lambda: timeouts.append(1), silence=answers.silence)


def test_an_answer_just_before_the_deadline_is_waited_past() -> None:
    """The store answers 1.8 s into a request's 2 s wait; the request then takes 1.2 s more:
    3 s in all, of which 1.2 s silent. (It failed at 2 s while the deadlines were moved 4
    times a timeout, from the silence seen at the last look, 1.5 s.)"""
    answers, timeouts, workers = kept_by_answers(2.0)

    def work() -> None:
        with answers.asking():
            time.sleep(1.8)
            answers.mark()
            time.sleep(1.2)

    assert trio.run(serve_one, workers, work) is None
    assert timeouts == []


def test_the_daemons_own_work_is_not_the_stores_silence() -> None:
    """A request works 1.5 s before it asks the store (decoding, say), which answers 1 s after
    being asked: 2.5 s in all, the store silent for 1 s of a 2 s timeout."""
    answers, timeouts, workers = kept_by_answers(2.0)

    def work() -> None:
        time.sleep(1.5)
        with answers.asking():
            time.sleep(1.0)
            answers.mark()

    assert trio.run(serve_one, workers, work) is None
    assert timeouts == []


def test_a_request_fails_when_the_silence_reaches_the_timeout() -> None:
    """Not before: a store asked and silent fails the request `timeout` after it was asked."""
    answers, timeouts, workers = kept_by_answers(2.0)

    def work() -> None:
        time.sleep(1.0)
        with answers.asking():
            time.sleep(10)

    started = time.monotonic()
    failed = trio.run(serve_one, workers, work)
    took = time.monotonic() - started
    assert failed is not None and timeouts == [1]
    assert 2.9 < took < 6, f"failed after {took:.1f} s, asked 1 s in, with a timeout of 2 s"
