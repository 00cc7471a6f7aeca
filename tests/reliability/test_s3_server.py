"""The suite's S3 server keeps S3's promise for conditional writes: of several PUTs that expect
one ETag (If-Match), or that the object is absent (If-None-Match: *), exactly one succeeds.
moto alone breaks it when its request threads switch between the check and the write
(s3_server.make_conditional_writes_atomic); every test of write-back conflicts on S3 relies on
it. The interpreter switches threads every microsecond here, so that the window moto leaves
open is found: without the lock, 7 of these two tests' 8 runs (100 rounds of eight PUTs each)
had two PUTs succeed in some round."""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.reliability.s3_server import S3Server

pytest.importorskip("boto3")

WRITERS = 8
ROUNDS = 100
SWITCH_SECONDS = 1e-6
JOIN_SECONDS = 30.0


@contextlib.contextmanager
def frequent_thread_switches() -> Iterator[None]:
    before = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_SECONDS)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def clients(server: S3Server) -> list[Any]:
    import boto3

    return [boto3.client("s3", endpoint_url=server.endpoint_url, region_name="us-east-1")
            for _ in range(WRITERS)]


def winners(put: Callable[[Any, int], None], writers: list[Any]) -> list[int]:
    """Which of the writers' `put`s, started together, succeeded."""
    from botocore.exceptions import ClientError

    succeeded: list[int] = []
    barrier = threading.Barrier(len(writers))

    def attempt(number: int) -> None:
        barrier.wait(JOIN_SECONDS)
        try:
            put(writers[number], number)
        except ClientError as e:
            assert e.response["Error"]["Code"] in {"PreconditionFailed", "ConditionalRequestConflict"}, e
        else:
            succeeded.append(number)

    threads = [threading.Thread(target=attempt, args=(n,)) for n in range(len(writers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(JOIN_SECONDS)
        assert not thread.is_alive(), "a PUT did not return"
    return succeeded


def test_one_of_the_puts_expecting_one_etag_succeeds(s3_server: S3Server) -> None:
    writers = clients(s3_server)
    bucket, key = s3_server.bucket, "conditional/if-match"
    with frequent_thread_switches():
        for round_ in range(ROUNDS):
            etag = writers[0].put_object(Bucket=bucket, Key=key, Body=b"base")["ETag"]

            def put(client: Any, number: int, etag: str = etag, round_: int = round_) -> None:
                client.put_object(Bucket=bucket, Key=key, Body=f"{round_} {number}".encode(), IfMatch=etag)

            won = winners(put, writers)
            assert len(won) == 1, (round_, won)
            stored = writers[0].get_object(Bucket=bucket, Key=key)["Body"].read()
            assert stored == f"{round_} {won[0]}".encode(), (round_, won, stored)


def test_one_of_the_puts_of_an_absent_object_succeeds(s3_server: S3Server) -> None:
    writers = clients(s3_server)
    bucket = s3_server.bucket
    with frequent_thread_switches():
        for round_ in range(ROUNDS):
            key = f"conditional/if-none-match/{round_}"

            def put(client: Any, number: int, key: str = key) -> None:
                client.put_object(Bucket=bucket, Key=key, Body=str(number).encode(), IfNoneMatch="*")

            won = winners(put, writers)
            assert len(won) == 1, (round_, won)
            stored = writers[0].get_object(Bucket=bucket, Key=key)["Body"].read()
            assert stored == str(won[0]).encode(), (round_, won, stored)
