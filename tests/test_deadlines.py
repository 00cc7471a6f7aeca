"""A wait for the store is bounded by its silence, not by its length (`-o timeout=`): requests
to a store that answers slowly are waited for past the timeout, a silent store fails them
within it. Without a mount: the batch of GETs (`each_answered`) and a FUSE request's wait for
its worker (`Workers`)."""

from __future__ import annotations

import asyncio
import time

import pytest
import trio

from zarrfs.errors import StoreError
from zarrfs.fuse.workers import Workers
from zarrfs.store.deadline import Answers, each_answered

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


async def serve_one(workers: Workers, seconds: float) -> StoreError | None:
    """A request whose worker takes `seconds`, with the deadlines kept as a mount keeps them:
    the error it failed with (None: it was answered)."""
    failed: list[StoreError] = []

    async def request(nursery: trio.Nursery) -> None:
        try:
            await workers.run(time.sleep, seconds)
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
    assert trio.run(serve_one, workers, 4 * TIMEOUT) is None
    assert timeouts == []


def test_a_request_fails_within_the_timeout_of_a_silent_store() -> None:
    timeouts: list[int] = []
    workers = Workers(TIMEOUT, lambda: timeouts.append(1), silence=lambda: 10 * TIMEOUT)
    started = time.monotonic()
    failed = trio.run(serve_one, workers, 10 * TIMEOUT)
    assert failed is not None and "no answer from the store" in str(failed)
    assert time.monotonic() - started < 8 * TIMEOUT  # (the worker itself sleeps 10)
    assert timeouts == [1]
