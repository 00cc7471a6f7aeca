"""The suite's S3 server keeps S3's promise for conditional writes: of several PUTs that expect
one ETag (If-Match), or that the object is absent (If-None-Match: *), exactly one succeeds,
and the others fail with 412. moto alone breaks it when its request threads switch between the
check and the write (s3_server.make_conditional_writes_atomic); every test of write-back
conflicts on S3 relies on it. The interpreter switches threads every microsecond here, so that
the window moto leaves open is found: without the lock, both tests failed in each of 3 runs
(100 rounds of eight PUTs each), two PUTs succeeding in one round."""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.helpers.s3_server import S3Server

pytest.importorskip("boto3")

WRITERS = 8
ROUNDS = 100
SWITCH_SECONDS = 1e-6
JOIN_SECONDS = 30.0
CONFLICTS = {"PreconditionFailed", "ConditionalRequestConflict"}


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


def race(writers: list[Any], bucket: str, key: str, **condition: str) -> None:
    """Every writer PUTs its number at `key` under `condition`, all started together: exactly
    one succeeds, its number is stored, and every other fails as a conflict."""
    from botocore.exceptions import ClientError

    succeeded: list[int] = []
    refused: list[str] = []  # (each loser's error code: a thread's assert would fail nothing)
    barrier = threading.Barrier(len(writers))

    def put(number: int) -> None:
        barrier.wait(JOIN_SECONDS)
        try:
            writers[number].put_object(Bucket=bucket, Key=key, Body=str(number).encode(), **condition)
        except ClientError as e:
            refused.append(str(e.response["Error"]["Code"]))
        else:
            succeeded.append(number)

    threads = [threading.Thread(target=put, args=(n,)) for n in range(len(writers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(JOIN_SECONDS)
        assert not thread.is_alive(), "a PUT did not return"
    assert len(succeeded) == 1 and set(refused) <= CONFLICTS, (key, succeeded, refused)
    assert len(succeeded) + len(refused) == len(writers), (key, succeeded, refused)
    stored = writers[0].get_object(Bucket=bucket, Key=key)["Body"].read()
    assert stored == str(succeeded[0]).encode(), (key, succeeded, stored)


def test_one_of_the_puts_expecting_one_etag_succeeds(s3_server: S3Server) -> None:
    writers = clients(s3_server)
    bucket, key = s3_server.bucket, "conditional/if-match"
    with frequent_thread_switches():
        for _ in range(ROUNDS):
            etag = writers[0].put_object(Bucket=bucket, Key=key, Body=b"base")["ETag"]
            race(writers, bucket, key, IfMatch=etag)


def test_one_of_the_puts_of_an_absent_object_succeeds(s3_server: S3Server) -> None:
    writers = clients(s3_server)
    with frequent_thread_switches():
        for round_ in range(ROUNDS):
            race(writers, s3_server.bucket, f"conditional/if-none-match/{round_}", IfNoneMatch="*")
