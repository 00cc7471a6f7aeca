"""`zarrfs mount` of a source that answers definitely fails at once, naming why: a refused
connection (nothing listens there: a mistyped port), a host name that does not exist, a 403,
a missing bucket or a prefix with no Zarr metadata (404). Retries are for silence and 5xx,
within `timeout` (tests/reliability/test_partition_reads.py: reads of a silent store retry until
then).

Each mount has `-o timeout=60`: before, a refusal or an unknown host failed only once it ran
out (31 s by default). FAILS_WITHIN is the command's own start and end on a loaded two-core
machine (imports alone take 2-3 s there), not the store's: the store's part is the one
attempt (tens of milliseconds to a second), checked without a process in
`test_a_store_fails_at_once_on_a_definite_answer`.
"""

from __future__ import annotations

import dataclasses
import http.server
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.helpers.http_server import answering
from tests.helpers.mounting import ZARRFS, is_mounted
from tests.helpers.s3_server import S3_ENV, S3Server, free_port
from zarrfs.errors import StoreError
from zarrfs.store import SourceOptions, Store

TIMEOUT = 60.0
FAILS_WITHIN = 10.0  # (see above: the process's start under load, far below TIMEOUT)
ONE_ATTEMPT = 3.0


class _Forbidden(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(403)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_HEAD = do_GET

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def forbidding() -> Iterator[str]:
    """The URL of an HTTP server that answers 403 Forbidden to everything."""
    with answering(_Forbidden) as port:
        yield f"http://127.0.0.1:{port}/array"


def mount_fails(source: str, mountpoint: Path, options: list[str]) -> tuple[str, float]:
    """`zarrfs mount` as an operator runs it (it forks the daemon): what it printed when it
    failed, and how long it took."""
    mountpoint.mkdir(exist_ok=True)
    began = time.monotonic()
    try:
        done = subprocess.run([ZARRFS, "mount", source, str(mountpoint), "-o",
                               ",".join([f"timeout={TIMEOUT:g}", *options])],
                              capture_output=True, text=True, timeout=TIMEOUT + 30,
                              env={**os.environ, **S3_ENV})  # (S3: no credentials to look for)
    finally:
        if is_mounted(mountpoint):
            subprocess.run(["fusermount3", "-u", str(mountpoint)], check=False)
    took = time.monotonic() - began
    assert done.returncode == 1, (done.returncode, done.stderr)
    return done.stderr, took


def test_a_refused_connection_fails_the_mount_at_once(tmp_path: Path) -> None:
    closed = free_port()
    for source, options in ((f"http://127.0.0.1:{closed}/array", []),
                            ("s3://bucket/array", [f"endpoint_url=http://127.0.0.1:{closed}"]),
                            ("gs://bucket/array", [f"endpoint_url=http://127.0.0.1:{closed}"])):
        message, took = mount_fails(source, tmp_path / "mnt", options)
        assert "connection refused" in message, message
        assert took < FAILS_WITHIN, (source, took)


def test_an_unknown_host_fails_the_mount_at_once(tmp_path: Path) -> None:
    for source, options in (("http://no-such-host.invalid/array", []),
                            ("s3://bucket/array", ["endpoint_url=http://no-such-host.invalid:9000"]),
                            ("gs://bucket/array", ["endpoint_url=http://no-such-host.invalid:9000"])):
        message, took = mount_fails(source, tmp_path / "mnt", options)
        assert "unknown host" in message and "no-such-host.invalid" in message, message
        assert took < FAILS_WITHIN, (source, took)


def test_forbidden_fails_the_mount_at_once(tmp_path: Path, forbidding: str) -> None:
    message, took = mount_fails(forbidding, tmp_path / "mnt", [])
    assert "403" in message and "Forbidden" in message, message
    assert took < FAILS_WITHIN, took


def test_no_bucket_and_no_metadata_fail_the_mount_at_once(tmp_path: Path, s3_server: S3Server) -> None:
    for source in ("s3://no-such-bucket/array", f"s3://{s3_server.bucket}/nothing-here"):
        message, took = mount_fails(source, tmp_path / "mnt", [f"endpoint_url={s3_server.endpoint_url}"])
        assert "not found" in message and "no Zarr array or group" in message, message
        assert took < FAILS_WITHIN, (source, took)


def test_a_store_fails_at_once_on_a_definite_answer() -> None:
    """Opening a store whose server cannot be reached and a request the server forbids: one
    attempt each, not retries until the deadline; the error names the answer. A request after
    the server went away is retried until its deadline (the server may be restarting)."""
    closed = free_port()
    for url, options, said in (
            (f"http://127.0.0.1:{closed}/array", {}, "connection refused by 127.0.0.1"),
            ("s3://bucket/array", {"endpoint_url": f"http://127.0.0.1:{closed}", "key": "testing",
                                   "secret": "testing"}, "connection refused by 127.0.0.1"),
            ("gs://bucket/array", {"endpoint_url": f"http://127.0.0.1:{closed}", "token": "anon"},
             "connection refused by 127.0.0.1"),
            ("http://no-such-host.invalid/array", {}, "unknown host no-such-host.invalid")):
        assert_fails_at_once(lambda url=url, options=options: Store.open(
            url, SourceOptions(client=options)).get("zarr.json"), said)

    with answering(_Forbidden) as port:
        store = Store.open(f"http://127.0.0.1:{port}/array")
        assert store.retry.deadline_seconds > ONE_ATTEMPT * 5
        assert_fails_at_once(lambda: store.get("zarr.json"), "403")
    # A refusal once the store was opened is a server restarting: retried within the deadline.
    store.retry = dataclasses.replace(store.retry, deadline_seconds=2 * ONE_ATTEMPT)
    began = time.monotonic()
    with pytest.raises(StoreError, match=r"[Cc]onnect"):
        store.get("zarr.json")
    assert ONE_ATTEMPT <= time.monotonic() - began < 4 * ONE_ATTEMPT


def assert_fails_at_once(action: Callable[[], object], said: str) -> None:
    began = time.monotonic()
    with pytest.raises(StoreError) as failed:
        action()
    assert time.monotonic() - began < ONE_ATTEMPT, failed.value
    assert said in str(failed.value), failed.value
