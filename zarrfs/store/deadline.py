"""Every store operation under a deadline: transient faults retried while time is left, each
attempt given what is left, and an asynchronous filesystem's request cancelled on its own
event loop when the time is up (so a store that accepts connections and never answers costs
a caller `deadline_seconds`, never more)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import fsspec
from fsspec.asyn import sync

from ..errors import StoreError, StoreTimeout
from .settings import DEFAULT_REMOTE_TIMEOUT

log = logging.getLogger("zarrfs.store")
T = TypeVar("T")
Errors = tuple[type[BaseException], ...]
# An attempt: called with the seconds it may take (None: unbounded, local files).
Attempt = Callable[[float | None], T]


@dataclass(frozen=True)
class RetryPolicy:
    """How long one operation of a remote store may take, its retries of transient faults
    included, before it fails with StoreError (NFS's `soft` mount: a deadline, never a hang).
    Every attempt is given what is left of the deadline; `retries=False` makes one attempt."""

    deadline_seconds: float = DEFAULT_REMOTE_TIMEOUT
    first_delay: float = 0.05
    max_delay: float = 2.0
    retries: bool = True


class Answers:
    """How long the store has been silent: since it last answered (a result, a missing key or
    a definite error; never a timeout), or since it was last asked when nothing was asked of
    it (the daemon's own work and idle time are not the store's silence). A wait for the store
    is bounded by its silence, so a read that needs many requests of a slow store that does
    answer takes as long as they take."""

    def __init__(self) -> None:
        self._heard = time.monotonic()
        self._asked = 0  # operations under way
        self._lock = threading.Lock()

    def mark(self) -> None:
        self._heard = time.monotonic()

    @contextlib.contextmanager
    def asking(self) -> Iterator[None]:
        """While one operation is under way (its retries included)."""
        with self._lock:
            if self._asked == 0:
                self._heard = time.monotonic()
            self._asked += 1
        try:
            yield
        finally:
            with self._lock:
                self._asked -= 1

    def silence(self) -> float:
        return time.monotonic() - self._heard


@functools.cache
def error_kinds(remote_clients: bool, azure: bool = False) -> tuple[Errors, Errors]:
    """(worth retrying, not worth retrying). Remote clients raise errors that are not OSErrors
    (botocore's through s3fs, aiohttp's through the http filesystem, the Azure SDK's through
    adlfs); they are imported only for a remote store (a local mount does not carry them:
    ~15 MB), the Azure SDK's only for Azure (~60 ms)."""
    transient: list[type[BaseException]] = [OSError, TimeoutError]
    permanent: list[type[BaseException]] = [PermissionError, IsADirectoryError, NotADirectoryError]
    if remote_clients:
        with contextlib.suppress(ImportError):
            from botocore.exceptions import BotoCoreError, ConnectionError, HTTPClientError

            transient += [ConnectionError, HTTPClientError]
            permanent.append(BotoCoreError)  # bad parameters, missing credentials, ...
        with contextlib.suppress(ImportError):
            from aiohttp import ClientError

            transient.append(ClientError)
    if azure:
        from azure.core.exceptions import AzureError, ClientAuthenticationError

        transient.append(AzureError)  # (a 4xx among them: `definite`)
        permanent.append(ClientAuthenticationError)
    return tuple(transient), tuple(permanent)


def run(key: str, attempt: Attempt[T], policy: RetryPolicy, errors: tuple[Errors, Errors], *,
        bounded: bool, answers: Answers, missing_ok: bool = True,
        on_retry: Callable[[], None] | None = None) -> T | None:
    """One store operation: None for a missing key (when reading), retries of transient
    faults while the deadline allows (`on_retry` called before each), StoreError naming `key`
    for the rest (StoreTimeout: no answer within the deadline). An answer (a result, a missing
    key, a definite error) is marked in `answers`."""
    with answers.asking():
        return _attempts(key, attempt, policy, errors, bounded=bounded, answers=answers,
                         missing_ok=missing_ok, on_retry=on_retry)


def _attempts(key: str, attempt: Attempt[T], policy: RetryPolicy, errors: tuple[Errors, Errors], *,
              bounded: bool, answers: Answers, missing_ok: bool,
              on_retry: Callable[[], None] | None) -> T | None:
    deadline = time.monotonic() + policy.deadline_seconds
    delay = policy.first_delay
    while True:
        left = deadline - time.monotonic()
        try:
            found = attempt(max(left, 0.01) if bounded else None)
            answers.mark()
            return found
        except StoreError:
            raise  # (from a store this one reads through, typed and retried there: a zip's)
        except FileNotFoundError as e:
            answers.mark()
            if missing_ok:
                return None
            raise StoreError(key, f"not found: {e}") from None
        except errors[1] as e:
            answers.mark()
            raise StoreError(key, one_line(e), getattr(e, "errno", None)) from None
        except errors[0] as e:
            answer = definite(e)
            if answer is not None:
                answers.mark()
                raise StoreError(key, answer) from None
            if not policy.retries or time.monotonic() + delay > deadline:
                if isinstance(e, TimeoutError) and bounded:
                    raise StoreTimeout(key, f"no answer within {policy.deadline_seconds:g} s") from None
                raise StoreError(key, one_line(e), getattr(e, "errno", None)) from None
            log.warning("store key %r: %s; retrying", key, one_line(e))
            if on_retry is not None:
                on_retry()
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, policy.max_delay)


# Resolver answers that a name does not exist (not EAI_AGAIN: a resolver that is down).
_NO_SUCH_NAME = {socket.EAI_NONAME, getattr(socket, "EAI_NODATA", socket.EAI_NONAME)}


def definite(error: BaseException) -> str | None:
    """What the store answered, when another try would get the same answer: an HTTP 4xx
    (403 Forbidden, 400, 405...; not a timeout, 408, or throttling, 429) or a host name that
    does not exist. None for the faults worth retrying within the deadline: silence, a
    dropped or refused connection (a server restarting), a 5xx.
    (A mistyped endpoint then fails a mount at once, not after its whole timeout.)"""
    status = getattr(error, "status", None) or getattr(error, "status_code", None)  # (aiohttp, Azure)
    if isinstance(status, int) and 400 <= status < 500 and status not in (408, 429):
        return one_line(error)
    unreachable = _unreachable(error)
    # A refusal once the store was reached is a server restarting: retried within the deadline
    # (a mistyped endpoint is refused when the store is opened: `reach`).
    if unreachable is None or unreachable == "connection refused":
        return None
    return f"{unreachable}: {one_line(error)}"


def _unreachable(error: BaseException) -> str | None:
    """"unknown host" or "connection refused" when that is what `error` comes from."""
    seen: BaseException | None = error
    while seen is not None:  # (clients wrap the socket's error: aiohttp, botocore, s3fs)
        if isinstance(seen, socket.gaierror) and seen.errno in _NO_SUCH_NAME:
            return "unknown host"
        if isinstance(seen, ConnectionRefusedError):
            return "connection refused"
        seen = seen.__cause__ or seen.__context__
    return None


def reach(url: str, seconds: float) -> None:
    """StoreError at once when the server at `url` cannot be reached for good: its host name
    does not exist, or nothing listens on its port (a mistyped endpoint). A client may hide
    those behind retries of its own (gcsfs retries a refused connection for half a minute).
    A connection accepted, or no answer within `seconds` (silence), is no answer here: the
    requests that follow wait for the store within their deadlines."""
    parts = urllib.parse.urlsplit(url)
    if not parts.hostname:
        return
    place = (parts.hostname, parts.port or (443 if parts.scheme == "https" else 80))
    found: list[str | None] = []

    def connect() -> None:  # (name resolution has no timeout of its own: in a thread)
        try:
            socket.create_connection(place, timeout=seconds).close()
        except OSError as e:
            found.append(_unreachable(e))

    trying = threading.Thread(target=connect, daemon=True, name="reach")
    trying.start()
    trying.join(seconds)
    # (the host and port only: a URL may carry credentials)
    if found and found[0] == "unknown host":
        raise StoreError(None, f"unknown host {place[0]}: no such name")
    if found and found[0] is not None:
        raise StoreError(None, f"connection refused by {place[0]}:{place[1]}: nothing listens there")


def call(fs: fsspec.AbstractFileSystem, seconds: float | None, method: str, *args: Any,
         **kwargs: Any) -> Any:
    """`fs.method(*args, **kwargs)`, abandoned after `seconds`: an asynchronous filesystem's
    coroutine is cancelled on its loop (TimeoutError), not left holding a thread."""
    if seconds is not None and getattr(fs, "async_impl", False) and getattr(fs, "loop", None):
        return sync(fs.loop, getattr(fs, "_" + method), *args, timeout=seconds, **kwargs)
    return getattr(fs, method)(*args, **kwargs)


def on_loop(fs: Any, seconds: float | None, coroutine_function: Callable[..., Any], *args: Any) -> Any:
    """A coroutine of `fs`'s own (an S3 request built by hand) run on its loop, cancelled after
    `seconds`."""
    return sync(fs.loop, coroutine_function, *args, timeout=seconds)


async def each_answered(requests: Sequence[Coroutine[Any, Any, T]], seconds: float | None,
                        on_answer: Callable[[], None]) -> list[T | BaseException]:
    """Every request's result or exception, all in flight at once. A batch is bounded by the
    store's silence, not by one request's deadline: TimeoutError (the rest cancelled) when
    none answers for `seconds`, so 500 GETs of a store answering each in 0.3 s are not failed
    after the 1 s one of them may take. `on_answer` is called as answers come."""
    tasks = [asyncio.ensure_future(request) for request in requests]
    pending = set(tasks)
    try:
        while pending:
            done, pending = await asyncio.wait(pending, timeout=seconds,
                                               return_when=asyncio.FIRST_COMPLETED)
            if not done:
                raise TimeoutError
            on_answer()
    finally:
        for task in pending:
            task.cancel()
    return [task.exception() or task.result() for task in tasks]


def one_line(error: BaseException) -> str:
    """An error's text on one line (what logs and one-line messages show)."""
    return " ".join(str(error).split()) or type(error).__name__
