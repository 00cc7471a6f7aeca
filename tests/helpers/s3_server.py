"""A moto S3 server on 127.0.0.1 that a test can stop and start again on the same port, its
conditional writes made atomic as S3's are."""

from __future__ import annotations

import contextlib
import functools
import logging
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

S3_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
}
BUCKET = "zarrfs-test"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@dataclass
class S3Server:
    """A moto S3 server on 127.0.0.1 that a test may stop and start again on the same port.

    moto keeps its state in the process, so objects survive a restart."""

    port: int
    bucket: str = BUCKET
    env: dict[str, str] = field(default_factory=lambda: dict(S3_ENV))
    _server: object | None = None

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self._server is not None

    def start(self) -> None:
        from moto.server import ThreadedMotoServer

        assert self._server is None
        # ThreadedMotoServer.start waits forever if its thread cannot bind, so make sure the
        # port is free first (it may still be held for a moment after a stop).
        deadline = time.monotonic() + 10
        while not _bindable(self.port):
            if time.monotonic() > deadline:
                raise RuntimeError(f"port {self.port} stayed busy")
            time.sleep(0.05)
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        server.start()
        self._server = server
        self._wait_listening()

    def stop(self) -> None:
        if self._server is not None:
            server, self._server = self._server, None
            server.stop()  # type: ignore[attr-defined]

    def _wait_listening(self) -> None:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5),
            ):
                return
            time.sleep(0.05)
        raise RuntimeError(f"moto server did not listen on port {self.port}")

    def uploading_options(self) -> dict[str, object]:
        """storage_options for s3fs putting a test's data in place: patient, where
        `s3fs_options` fails fast. A put of thousands of chunks queues its connections at the
        one server, and on a loaded machine one waited over a second to connect (CI: a
        ConnectTimeoutError before the test began)."""
        return self.s3fs_options(config_kwargs={
            "connect_timeout": 30, "read_timeout": 60, "retries": {"max_attempts": 5, "mode": "standard"}})

    def s3fs_options(self, **extra: object) -> dict[str, object]:
        """storage_options for s3fs: this endpoint, no instance cache, fast failure."""
        return {
            "key": self.env["AWS_ACCESS_KEY_ID"],
            "secret": self.env["AWS_SECRET_ACCESS_KEY"],
            "client_kwargs": {"endpoint_url": self.endpoint_url, "region_name": "us-east-1"},
            "config_kwargs": {
                "connect_timeout": 1,
                "read_timeout": 5,
                "retries": {"max_attempts": 1, "mode": "standard"},
            },
            "skip_instance_cache": True,
            "use_listings_cache": False,
            **extra,
        }


_OBJECT_WRITES = threading.Lock()


@functools.cache  # (once per process: a later call would wrap a test's own wrapper too)
def make_conditional_writes_atomic() -> None:
    """S3 checks a conditional write's If-Match or If-None-Match and writes in one step, so of
    two PUTs that expect one ETag, one fails. moto (5.2) checks, then writes, with nothing
    between its request threads: after a thread switch between the two steps both PUTs
    succeed, and the first one's bytes are overwritten unseen, an update lost that S3 never
    loses. It made test_cluster lose one fsynced write-back of a shard in a CI run; with the
    interpreter switching threads every 10 us it did so in 8 of 12 runs. Here each object
    write and delete of moto runs whole under one lock (a test's own wrapper of put_object,
    as two_mount_targets' gate, wraps this one, so it holds a request before it takes the
    lock)."""
    from moto.s3.responses import S3Response

    for name in ("put_object", "delete_object"):
        method = getattr(S3Response, name)

        def atomic(response: Any, _method: Any = method) -> Any:
            with _OBJECT_WRITES:
                return _method(response)

        setattr(S3Response, name, functools.update_wrapper(atomic, method))


def reset_moto() -> None:
    """Drop what moto holds in memory (it is process-wide), so the next server starts empty."""
    from moto.moto_api._internal.models import moto_api_backend

    moto_api_backend.reset()


@contextlib.contextmanager
def running(server: S3Server) -> Iterator[S3Server]:
    """Start `server` with an empty bucket; stop it and forget moto's state at the end."""
    import boto3

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    make_conditional_writes_atomic()
    server.start()
    try:
        client = boto3.client("s3", endpoint_url=server.endpoint_url, region_name="us-east-1")
        with contextlib.suppress(client.exceptions.BucketAlreadyOwnedByYou):
            client.create_bucket(Bucket=server.bucket)
        yield server
    finally:
        server.stop()
        reset_moto()


ServerT = TypeVar("ServerT", bound=S3Server)


def serving(server: ServerT, monkeypatch: Any) -> Iterator[ServerT]:
    """The body of a fixture: S3 credentials in the environment, then `server` running."""
    import pytest

    pytest.importorskip("moto.server")
    for name, value in S3_ENV.items():
        monkeypatch.setenv(name, value)
    with running(server) as started:
        yield started
