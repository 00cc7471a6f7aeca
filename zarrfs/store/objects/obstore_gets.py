"""S3 GETs and listings through obstore (Rust's object_store), where they mean the same as
botocore's.

An S3 mount's cold read is CPU-bound on a small machine: every GET through aiohttp costs
~1 ms of Python on fsspec's event-loop thread, holding the interpreter lock the FUSE loop
and the decoders want. obstore does the request, signing included, in Rust without the lock;
its coroutine still runs on fsspec's loop, so the store's deadline cancels it as any other.
Measured on the latency benchmark (moto behind a 20 ms proxy, 512 KiB chunks): the daemon's
CPU per GET about halves. A single GET whose caller has time for obstore's own bound on it
skips the loop altogether (`get_now`, in the caller's thread).

Only what this path would answer exactly as botocore does goes through it: static
credentials (refreshable ones stay with botocore, which refreshes them), no proxies,
requester pays or other request settings (`presigned.usable`). A missing object is
FileNotFoundError; any other failure answers None, and that filesystem's GETs go back to
aiohttp/botocore for good (they know what to do with redirects, throttling, odd servers).
"""

from __future__ import annotations

import datetime
import functools
import logging
import os
import weakref
from typing import Any

from ..ranges import RangePastEnd
from . import presigned

log = logging.getLogger("zarrfs.store")
# (id(s3fs instance), bucket) -> its obstore S3Stores: for fsspec's loop, for `get_now`
_stores: dict[tuple[int, str], tuple[Any, Any]] = {}
_refused: set[int] = set()  # ids of s3fs instances whose GETs go through botocore


def usable(fs: Any) -> bool:
    if id(fs) in _refused or not presigned.usable(fs):
        return False
    try:
        import obstore  # noqa: F401
    except ImportError:
        _refused.add(id(fs))
        return False
    return True


async def get(fs: Any, bucket: str, key: str, start: int | None,
              length: int | None) -> tuple[memoryview, str] | None:
    """The object's bytes (`length` of them from `start`, fewer past its end) and its ETag;
    None when botocore must answer instead. Raises FileNotFoundError.

    The bytes are a view of the buffer obstore gathered them into, not a copy: copying a 6 MB
    shard faults in a fresh mapping and holds the interpreter lock on the event loop's thread
    (on a sharded read over S3, ~10% of the daemon's CPU)."""
    import obstore
    from obstore.exceptions import NotFoundError

    store = await _store(fs, bucket)
    if store is None:
        return None
    options: dict[str, Any] = {} if start is None or length is None else {"range": (start, start + length)}
    try:
        result = await obstore.get_async(store, key, options=options)  # type: ignore[arg-type]
        data = await result.bytes_async()
        etag = result.meta.get("e_tag")
    except (FileNotFoundError, NotFoundError):
        raise FileNotFoundError(f"{bucket}/{key}") from None
    except Exception as e:  # (obstore's errors, whatever they are): botocore from now on
        if options and "416 Range Not Satisfiable" in str(e):
            raise RangePastEnd(f"{bucket}/{key}: range past the end") from None
        log.debug("obstore GET of %s/%s failed (%s): S3 reads go through botocore", bucket, key, e)
        _refuse(fs)
        return None
    return (memoryview(data), etag) if etag else None


def get_now(fs: Any, bucket: str, key: str, start: int | None, length: int | None,
            seconds: float | None) -> tuple[memoryview, str] | None:
    """As `get`, in the calling thread, for a caller that may wait `seconds`: obstore waits
    without the interpreter lock, and the GET makes no trip through fsspec's loop (the
    caller's there and back, and obstore's two answers handed to the loop: from moto, a
    tile's GET through a mount 3.0 -> 2.6 ms). A request here cannot be cancelled at the
    caller's deadline as one on the loop is: it is made only when the client's own bound
    (one try, `_timeout` from connecting to the body's last byte) is within `seconds`, with
    the client `get` made. None when it is not, or on any failure but a missing object (the
    caller then asks `get`, which retries, or hands over to botocore)."""
    stores = _stores.get((id(fs), bucket))
    if stores is None or not usable(fs) or (seconds is not None and seconds < _timeout(fs)):
        return None
    import obstore  # (after `usable`: without the package, GETs go through botocore)
    from obstore.exceptions import NotFoundError

    options: dict[str, Any] = {} if start is None or length is None else {"range": (start, start + length)}
    try:
        result = obstore.get(stores[1], key, options=options)  # type: ignore[arg-type]
        data = result.bytes()
        etag = result.meta.get("e_tag")
    except (FileNotFoundError, NotFoundError):
        raise FileNotFoundError(f"{bucket}/{key}") from None
    except Exception as e:  # (obstore's errors, whatever they are): the loop's `get` tries
        log.debug("obstore GET of %s/%s in the caller's thread failed (%s)", bucket, key, e)
        return None
    return (memoryview(data), etag) if etag else None


async def listed(fs: Any, bucket: str, prefix: str) -> dict[str, dict[str, Any]] | None:
    """Every object below the directory `prefix` ("a/c": "a/c/...") as fsspec's
    `find(detail=True)` describes it (its name, size, ETag and time, by "bucket/key"); None
    when botocore must answer instead. (botocore parses a listing's XML in Python, on the
    event loop's thread: 512 objects cost ~25 ms of the interpreter's time there.)"""
    import obstore

    store = await _store(fs, bucket)
    if store is None:
        return None
    try:
        found = await obstore.list(store, prefix or None, chunk_size=1000).collect_async()
    except Exception as e:  # (obstore's errors, whatever they are): botocore from now on
        log.debug("obstore listing of %s/%s failed (%s): S3 goes through botocore", bucket, prefix, e)
        _refuse(fs)
        return None
    return {f"{bucket}/{meta['path']}": _described(f"{bucket}/{meta['path']}", meta) for meta in found}


async def prepare(fs: Any, bucket: str) -> None:
    """Make the bucket's S3Stores now: their TLS set-up costs ~15 ms of CPU, which a mount's
    first listing or GET would otherwise pay, on the first read's path."""
    await _store(fs, bucket)


def _described(name: str, meta: Any) -> dict[str, Any]:
    """An object of a listing as fsspec's `find(detail=True)` describes it."""
    return {"name": name, "type": "file", "size": meta["size"], "ETag": meta["e_tag"],
            "LastModified": meta["last_modified"]}


async def _store(fs: Any, bucket: str) -> Any:
    """One obstore S3Store per s3fs instance and bucket for GETs on fsspec's loop (and one for
    `get_now`), with botocore's endpoint, region and (static) credentials; None when the
    credentials are not static."""
    stores = _stores.get((id(fs), bucket))
    if stores is not None:
        return stores[0]
    await fs.set_session()
    client = await fs.get_s3(bucket)
    credentials = await fs.session.get_credentials()
    if credentials is None or hasattr(credentials, "refresh_needed"):  # (refreshable)
        _refuse(fs)
        return None
    frozen = await credentials.get_frozen_credentials()
    try:
        roots = _roots()
    except OSError:  # (botocore says why, as it reads it too)
        _refuse(fs)
        return None
    endpoint = client.meta.endpoint_url
    seconds = datetime.timedelta(seconds=_timeout(fs))
    settings: dict[str, Any] = dict(
        endpoint=endpoint, region=client.meta.region_name or "us-east-1",
        access_key_id=frozen.access_key, secret_access_key=frozen.secret_key,
        **({"session_token": frozen.token} if frozen.token else {}),
        client_options={"allow_http": endpoint.startswith("http:"), "timeout": seconds,
                        "connect_timeout": datetime.timedelta(seconds=float(
                            fs.config_kwargs.get("connect_timeout") or fs.connect_timeout or 10)),
                        **roots})
    if (id(fs), bucket) not in _stores:
        weakref.finalize(fs, _forget, id(fs))
    _stores[(id(fs), bucket)] = (_made(bucket, settings, retries=2), _made(bucket, settings, retries=0))
    return _stores[(id(fs), bucket)][0]


def _made(bucket: str, settings: dict[str, Any], retries: int) -> Any:
    from obstore.store import S3Store

    seconds = settings["client_options"]["timeout"]
    return S3Store(bucket, **settings, retry_config={"max_retries": retries, "retry_timeout": seconds})


def _timeout(fs: Any) -> float:
    """How long one request of obstore's may take, from connecting to the body's last byte:
    botocore's read timeout (s3fs's `config_kwargs`, else its default)."""
    return float(fs.config_kwargs.get("read_timeout") or fs.read_timeout or 60)


def _roots() -> dict[str, bytes]:
    """TLS roots as botocore takes them: AWS_CA_BUNDLE (its certificates), else the system's."""
    bundle = os.environ.get("AWS_CA_BUNDLE")
    return {"root_certificate": _certificates(bundle)} if bundle else {}


@functools.cache
def _certificates(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _refuse(fs: Any) -> None:
    if id(fs) not in _refused:
        _refused.add(id(fs))
        weakref.finalize(fs, _forget, id(fs))


def _forget(fs_id: int) -> None:
    _refused.discard(fs_id)
    for found in [k for k in _stores if k[0] == fs_id]:
        del _stores[found]
