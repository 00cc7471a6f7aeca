"""S3 GETs as presigned URLs fetched with plain aiohttp.

A `get_object` through s3fs costs ~1.5 ms of CPU in botocore (event hooks, response parsing,
signing), on fsspec's one event-loop thread: it made an S3 mount's cold read CPU-bound at
0.7x TensorStore's speed. botocore still signs (the same client, credentials, region and
endpoint as every other call), but the request and response are aiohttp's alone: 0.9 ms.

Only the answers this needs are taken here: the object (200, 206), missing (404) and a range
past its end (416). Anything else (a redirect to the bucket's region, an expired signature,
throttling) goes through `get_object`, which knows what to do with it. So do stores with
settings this path would not honour (requester pays, SSE-C, proxies, `verify`). TLS is
verified against AWS_CA_BUNDLE as botocore does, else the system's certificates; if aiohttp
refuses a certificate that botocore takes, that filesystem's GETs go back to botocore.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import ssl
import weakref
from typing import Any

from fsspec.asyn import sync

from ..ranges import RangePastEnd

_PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")
# By identity: fsspec filesystems with the same options compare equal, and one must not use
# (or close) another's session.
_sessions: dict[int, Any] = {}  # id(s3fs instance) -> its aiohttp session
_refused: set[int] = set()  # ids of s3fs instances whose TLS aiohttp refused


def usable(fs: Any) -> bool:
    """Whether a presigned GET means the same as `get_object` for this filesystem."""
    if id(fs) in _refused or fs.req_kw or fs.s3_additional_kwargs or fs.version_aware:
        return False
    if {"verify", "proxies"} & (set(fs.client_kwargs) | set(fs.config_kwargs)):
        return False
    return not any(os.environ.get(name) or os.environ.get(name.lower()) for name in _PROXY_VARIABLES)


async def get(fs: Any, bucket: str, key: str, headers: dict[str, str]) -> tuple[bytes, str] | None:
    """The object's bytes and ETag; None when `get_object` must answer instead. Raises
    FileNotFoundError (404) and RangePastEnd (416)."""
    import aiohttp

    session = _session(fs)
    if session is None:
        return None
    await fs.set_session()
    client = await fs.get_s3(bucket)
    url = await client.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": key})
    try:
        async with session.get(url, headers=headers, allow_redirects=False) as response:
            if response.status == 404:
                raise FileNotFoundError(f"{bucket}/{key}")
            if response.status == 416:
                raise RangePastEnd(f"{bucket}/{key}: range past the end")
            if response.status not in (200, 206) or "ETag" not in response.headers:
                return None
            return await response.read(), response.headers["ETag"]
    except aiohttp.ClientSSLError:
        _refused.add(id(fs))  # botocore's certificates are not the system's: leave TLS to it
        return None


def _session(fs: Any) -> Any:
    """One aiohttp session per s3fs instance (its connections are kept open between GETs),
    made on fsspec's event loop, closed with the instance or at exit; None when TLS cannot be
    set up as botocore would (an AWS_CA_BUNDLE it cannot load: botocore says why)."""
    import aiohttp

    session = _sessions.get(id(fs))
    if session is None:
        timeout = aiohttp.ClientTimeout(sock_connect=fs.connect_timeout, sock_read=fs.read_timeout)
        try:
            tls = ssl.create_default_context(cafile=os.environ.get("AWS_CA_BUNDLE") or None)
        except (OSError, ssl.SSLError):
            _refused.add(id(fs))
            weakref.finalize(fs, _refused.discard, id(fs))
            return None
        session = _sessions[id(fs)] = aiohttp.ClientSession(
            timeout=timeout, connector=aiohttp.TCPConnector(ssl=tls))
        weakref.finalize(fs, _close, id(fs), fs.loop, session)
    return session


def _close(key: int, loop: Any, session: Any) -> None:
    _sessions.pop(key, None)
    _refused.discard(key)
    if loop is None or session.closed:
        return
    try:
        on_loop = asyncio.get_running_loop() is loop
    except RuntimeError:
        on_loop = False
    if on_loop:  # (collected inside a coroutine on the loop itself)
        loop.create_task(session.close())
    elif loop.is_running():
        with contextlib.suppress(Exception):
            sync(loop, session.close, timeout=1)
