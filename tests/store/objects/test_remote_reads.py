"""S3 reads through obstore (zarrfs.store.objects.obstore_gets) against a moto server: what they read and
the generation they report, that neither botocore nor the presigned aiohttp path is asked,
that a server that never answers costs a read the store's deadline and no more (a GET made
in the caller's thread too), and that a
mount of a plain and a sharded array on S3 reads the values zarr-python wrote. In the fast
tier: the reads that wait on no deadline and mount nothing (a second or so each, the moto
server's start included)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import s3fs
import zarr
from fsspec.asyn import sync

from tests.helpers.mounting import mounted
from tests.helpers.netproxy import proxied
from tests.helpers.s3_server import S3Server, free_port, serving
from zarrfs.errors import StoreError
from zarrfs.store import ByteRange, RetryPolicy, Store
from zarrfs.store.objects import obstore_gets, presigned

CONTENT = bytes(range(256)) * 40


@pytest.fixture
def s3_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[S3Server]:
    yield from serving(S3Server(free_port()), monkeypatch)


SWALLOWED = RetryPolicy(deadline_seconds=2.0)  # the deadline of reads the proxy swallows


def spied_store(server: S3Server, monkeypatch: pytest.MonkeyPatch, endpoint: str | None = None,
                deadline: float = 10.0) -> tuple[Store, list[str]]:
    """A store on the server holding CONTENT at "k", and the other paths its reads took."""
    options = server.s3fs_options()
    if endpoint is not None:
        options["client_kwargs"]["endpoint_url"] = endpoint
    fs = s3fs.S3FileSystem(**options)
    store = Store(fs, f"{server.bucket}/p", retry=RetryPolicy(deadline_seconds=deadline))
    Store(s3fs.S3FileSystem(**server.s3fs_options()), f"{server.bucket}/p").put("k", CONTENT)
    others: list[str] = []
    presigned_get = presigned.get
    client = sync(fs.loop, fs.set_session)  # (botocore's own hooks name the operations it calls)
    client.meta.events.register("before-call.s3", lambda model, **_: others.append(model.name))

    async def presigned_spy(*args: Any, **kwargs: Any) -> Any:
        others.append("presigned")
        return await presigned_get(*args, **kwargs)

    monkeypatch.setattr(presigned, "get", presigned_spy)
    return store, others


@pytest.mark.fast
def test_reads_go_through_obstore_with_the_objects_etag(s3_server: S3Server,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    store, others = spied_store(s3_server, monkeypatch)
    assert obstore_gets.usable(store.driver.fs)
    whole = store.read("k")
    assert whole is not None and whole.data == CONTENT
    # (a view of obstore's buffer, not a copy; whole bytes for readers of documents)
    assert isinstance(whole.data, memoryview) and whole.data.readonly
    assert store.get("k") == CONTENT and isinstance(store.get("k"), bytes)
    assert store.read("k", ByteRange(100, 1000)) == (CONTENT[100:1100], whole.generation)
    assert store.read("k", ByteRange(len(CONTENT) - 10, 100)) == (CONTENT[-10:], whole.generation)
    assert store.read("absent") is None
    assert others == []
    assert whole.generation == store.generation("k")  # the ETag a compare-and-swap expects
    # A range starting past the end reads nothing (obstore refuses it: the presigned path
    # answers), and obstore still serves the next read.
    assert store.get("k", ByteRange(len(CONTENT) + 10, 5)) == b""
    others.clear()
    assert store.read("k", ByteRange(0, 10)) == (CONTENT[:10], whole.generation)
    assert others == []


def test_a_server_that_never_answers_costs_the_deadline(s3_server: S3Server,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    with proxied(s3_server.port) as proxy:
        store, _ = spied_store(s3_server, monkeypatch, endpoint=proxy.url)
        assert store.read("k") is not None  # (obstore's client is made, a connection open)
        store.retry = SWALLOWED  # (not before: a busy machine may take over 2 s to answer)
        proxy.swallow()
        started = time.monotonic()
        with pytest.raises(StoreError):
            store.read("k")
        assert time.monotonic() - started < 2.0 + 2.0


def test_a_get_in_the_callers_thread_is_bounded_within_the_deadline(s3_server: S3Server) -> None:
    """A single GET is made in the caller's own thread (obstore_gets.get_now), where it cannot be
    cancelled: only when obstore's bound on it (one try of `read_timeout` seconds, connecting
    to the body's last byte) is within the caller's time. A server that never answers then
    costs that bound and a read the store's deadline, no more."""
    Store(s3fs.S3FileSystem(**s3_server.s3fs_options()), s3_server.bucket).put("p/k", CONTENT)
    with proxied(s3_server.port) as proxy:
        options: Any = s3_server.s3fs_options()
        options["client_kwargs"]["endpoint_url"] = proxy.url
        options["config_kwargs"]["read_timeout"] = 1  # (botocore's: obstore's client takes it)
        fs = s3fs.S3FileSystem(**options)
        store = Store(fs, f"{s3_server.bucket}/p", retry=RetryPolicy(deadline_seconds=3.0))
        generation = store.generation("k")
        assert store.read("k") == (CONTENT, generation)  # (obstore's clients made)
        assert obstore_gets.get_now(fs, s3_server.bucket, "p/k", 0, 10, 1.0) == (CONTENT[:10], generation)
        assert obstore_gets.get_now(fs, s3_server.bucket, "p/k", 0, 10, 0.9) is None  # (not within 0.9 s)
        proxy.swallow()
        started = time.monotonic()
        assert obstore_gets.get_now(fs, s3_server.bucket, "p/k", None, None, 3.0) is None
        assert 1.0 <= time.monotonic() - started < 1.0 + 1.5
        started = time.monotonic()
        with pytest.raises(StoreError):
            store.read("k", ByteRange(0, 100))
        assert time.monotonic() - started < 3.0 + 2.0


@pytest.mark.parametrize("sharded", [False, True], ids=["plain", "sharded"])
def test_a_mount_on_s3_reads_what_zarr_python_wrote(s3_server: S3Server, tmp_path: Path,
                                                     sharded: bool) -> None:
    values = np.random.default_rng(7).integers(0, 1000, (256, 384), dtype="<u2")
    zarr.create_array(
        store=f"s3://{s3_server.bucket}/a", shape=values.shape, dtype="<u2",
        chunks=(32, 64), shards=(128, 128) if sharded else None,
        compressors=zarr.codecs.ZstdCodec(level=1),
        storage_options={"endpoint_url": s3_server.endpoint_url, "key": "testing", "secret": "testing"},
    )[...] = values
    with mounted(f"s3://{s3_server.bucket}/a", tmp_path / "mnt",
                 [f"endpoint_url={s3_server.endpoint_url}"]) as mount:
        read = np.frombuffer(mount.data.read_bytes(), "<u2").reshape(values.shape)
    assert np.array_equal(read, values)


@pytest.mark.fast
def test_many_objects_and_ranges_are_read_in_one_batch(s3_server: S3Server,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    store, others = spied_store(s3_server, monkeypatch)
    store.put("other", b"second object")
    generations = [store.generation("k"), store.generation("other")]
    others.clear()
    found = store.read_many(["k", "absent", "other"])
    assert found == [(CONTENT, generations[0]), None, (b"second object", generations[1])]
    ranges = [ByteRange(0, 10), ByteRange(5000, 20), ByteRange(len(CONTENT) - 5, 100)]
    assert store.read_ranges("k", ranges) == [
        (CONTENT[:10], generations[0]), (CONTENT[5000:5020], generations[0]), (CONTENT[-5:], generations[0])]
    assert store.read_ranges("absent", ranges) is None
    assert others == []  # (all through obstore)
    past_end = store.read_ranges("k", [ByteRange(0, 3), ByteRange(len(CONTENT) + 10, 5)])
    assert past_end == [(CONTENT[:3], generations[0]), (b"", generations[0])]


def test_a_batch_that_gets_no_answer_costs_the_deadline(s3_server: S3Server,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    with proxied(s3_server.port) as proxy:
        store, _ = spied_store(s3_server, monkeypatch, endpoint=proxy.url)
        assert store.read_many(["k", "k"]) is not None
        store.retry = SWALLOWED
        proxy.swallow()
        for read in (lambda: store.read_many(["k", "k", "k"]),
                     lambda: store.read_ranges("k", [ByteRange(0, 5), ByteRange(100, 5)])):
            started = time.monotonic()
            with pytest.raises(StoreError):
                read()
            assert time.monotonic() - started < 2.0 + 2.0
