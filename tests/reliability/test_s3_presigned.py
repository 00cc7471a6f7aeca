"""S3 reads as presigned GETs (zarrfs.store.presigned) against a moto server: what they read,
and that every answer they do not take, and every store they would not serve as botocore
does, goes through botocore's get_object."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from typing import Any

import pytest
from fsspec.asyn import sync

from tests.reliability.s3_server import S3Server
from zarrfs.store import ByteRange, RetryPolicy, Store, objstore, presigned

s3fs = pytest.importorskip("s3fs")
aiohttp = pytest.importorskip("aiohttp")

CONTENT = b"0123456789" * 100


@pytest.fixture(autouse=True)
def without_obstore(monkeypatch: pytest.MonkeyPatch) -> None:
    """The presigned path is the one tested here (obstore, tried before it: test_remote_reads)."""
    monkeypatch.setattr(objstore, "usable", lambda fs: False)


def counted(server: S3Server, monkeypatch: pytest.MonkeyPatch, **options: Any) -> tuple[Store, list[str]]:
    """A store on the server holding CONTENT at "k", and the botocore operations it calls."""
    fs = s3fs.S3FileSystem(**server.s3fs_options(), **options)
    fs.retries = 1
    store = Store(fs, f"{server.bucket}/p", retry=RetryPolicy(deadline_seconds=10.0, first_delay=0.05))
    store.put("k", CONTENT)
    calls: list[str] = []
    original = fs._call_s3

    async def spy(method: str, *args: Any, **kwargs: Any) -> Any:
        calls.append(method)
        return await original(method, *args, **kwargs)

    monkeypatch.setattr(fs, "_call_s3", spy)
    return store, calls


def test_reads_are_presigned_gets_with_the_objects_etag(s3_server: S3Server,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    store, calls = counted(s3_server, monkeypatch)
    whole = store.read("k")
    assert whole is not None and whole.data == CONTENT
    assert store.read("k", ByteRange(5, 7)) == (CONTENT[5:12], whole.generation)
    assert store.read("absent") is None
    assert store.get("k", ByteRange(len(CONTENT) + 10, 5)) == b""  # a range past the end
    assert "get_object" not in calls
    assert whole.generation == store.generation("k")  # the ETag a compare-and-swap expects


@pytest.mark.parametrize("setting", ["requester_pays", "https_proxy"])
def test_stores_it_would_not_serve_as_botocore_does_use_get_object(
        s3_server: S3Server, monkeypatch: pytest.MonkeyPatch, setting: str) -> None:
    options: dict[str, Any] = {}
    if setting == "requester_pays":
        options["requester_pays"] = True
    else:  # botocore would send HTTPS requests through it (this endpoint is plain HTTP)
        monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    store, calls = counted(s3_server, monkeypatch, **options)
    found = store.read("k")
    assert found is not None and found.data == CONTENT
    assert calls == ["get_object"]


@pytest.fixture
def unavailable() -> Iterator[str]:
    """An HTTP server answering every request with 503 Slow Down."""

    class SlowDown(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), SlowDown)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/bucket/k"
    finally:
        server.shutdown()
        thread.join()


def test_an_answer_it_does_not_take_is_asked_of_get_object(
        s3_server: S3Server, monkeypatch: pytest.MonkeyPatch, unavailable: str) -> None:
    store, calls = counted(s3_server, monkeypatch)
    client = sync(store.fs.loop, store.fs.set_session)

    async def elsewhere(*args: Any, **kwargs: Any) -> str:
        return unavailable

    monkeypatch.setattr(client, "generate_presigned_url", elsewhere)
    found = store.read("k")
    assert found is not None and found.data == CONTENT
    assert calls == ["get_object"]


def test_a_certificate_aiohttp_refuses_leaves_that_store_to_botocore(
        s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> None:
    store, calls = counted(s3_server, monkeypatch)
    attempts: list[str] = []

    class Refusing:
        def get(self, url: str, **kwargs: Any) -> Any:
            attempts.append(url)
            key = SimpleNamespace(host="127.0.0.1", port=443, ssl=True)
            raise aiohttp.ClientSSLError(key, OSError("certificate verify failed"))

    monkeypatch.setattr(presigned, "_session", lambda fs: Refusing())
    for _ in range(2):
        found = store.read("k")
        assert found is not None and found.data == CONTENT
    assert len(attempts) == 1  # the second read went to botocore at once
    assert calls == ["get_object", "get_object"]


def test_a_ca_bundle_it_cannot_load_leaves_that_store_to_botocore(
        s3_server: S3Server, monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """Not a missing object: the chunk must not read as the fill value."""
    store, calls = counted(s3_server, monkeypatch)
    monkeypatch.setenv("AWS_CA_BUNDLE", str(tmp_path / "no-such-bundle.pem"))
    found = store.read("k")
    assert found is not None and found.data == CONTENT
    assert calls == ["get_object"]
