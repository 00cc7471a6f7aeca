"""Where errors become errno values (one place), and the wrapper every request handler
runs in: a bad chunk or a store fault fails one request, never the daemon."""

from __future__ import annotations

import errno
import functools
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

import pyfuse3

from ..errors import (
    ChunkError,
    EditRefused,
    MetadataError,
    ReadOnlyError,
    ResizeError,
    StoreError,
    ZarrfsError,
)
from ..options import MountOptions
from ..views import FileTooLargeError
from ..views.files import FixedBytesError

log = logging.getLogger("zarrfs.fuse")
T = TypeVar("T")
P = ParamSpec("P")


class CounterSink(Protocol):
    def add(self, **amounts: float) -> None: ...


class Timings(Protocol):
    """Where request latencies go (the daemon's metrics): called on the event loop only."""

    def begin(self) -> None: ...
    def end(self, operation: str, seconds: float) -> None: ...


class Served(Protocol):
    @property
    def options(self) -> MountOptions: ...

    @property
    def counters(self) -> CounterSink: ...

    @property
    def timings(self) -> Timings | None: ...


S = TypeVar("S", bound=Served)
# What the store's own system errors mean to the writer as they are: a full disk or quota
# is not an I/O error to retry, and a file the mounter may not read is not one either; a path
# the store cannot hold (a local store's names over NAME_MAX) is the name's fault, not an I/O one.
PASSED_THROUGH = {errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.ENAMETOOLONG}


def errno_for(error: BaseException) -> int:
    """The one place where errors become errno values."""
    if isinstance(error, EditRefused):
        return error.errno
    if isinstance(error, ReadOnlyError):
        return errno.EROFS
    if isinstance(error, FileTooLargeError):
        return errno.EFBIG
    if isinstance(error, StoreError) and error.errno in PASSED_THROUGH:
        return error.errno
    if isinstance(error, ChunkError | StoreError | MetadataError):
        return errno.EIO
    if isinstance(error, ResizeError):
        return errno.EINVAL
    if isinstance(error, FixedBytesError):
        return errno.EPERM
    if isinstance(error, FileNotFoundError):
        return errno.ENOENT
    if isinstance(error, PermissionError):
        return errno.EACCES
    return errno.EIO


def boundary(
    handler: Callable[Concatenate[S, P], Coroutine[Any, Any, T]],
) -> Callable[Concatenate[S, P], Coroutine[Any, Any, T]]:
    """Let only FUSEError out of a handler: a bad chunk or a store fault fails one request."""

    @functools.wraps(handler)
    async def wrapper(self: S, *args: P.args, **kwargs: P.kwargs) -> T:
        if self.options.debug:
            log.debug("%s%s", handler.__name__, brief(args))
        self.counters.add(requests=1)
        timings = self.timings
        if timings is not None:
            timings.begin()
        start = time.perf_counter()
        try:
            return await handler(self, *args, **kwargs)
        except pyfuse3.FUSEError:
            raise
        except EditRefused as e:  # (the user's request, refused: not a fault)
            log.info("%s refused: %s", handler.__name__, e)
            raise pyfuse3.FUSEError(e.errno) from None
        except ZarrfsError as e:
            log.error("%s: %s", handler.__name__, e)
            self.counters.add(errors=1)
            raise pyfuse3.FUSEError(errno_for(e)) from None
        except FileNotFoundError:
            raise pyfuse3.FUSEError(errno.ENOENT) from None  # a chunk file gone with a resize
        except Exception:
            log.exception("internal error in %s%r", handler.__name__, args[:3])
            self.counters.add(errors=1)
            raise pyfuse3.FUSEError(errno.EIO) from None
        finally:
            if timings is not None:
                timings.end(handler.__name__, time.perf_counter() - start)

    return wrapper  # type: ignore[return-value]


def brief(args: tuple[Any, ...]) -> str:
    """Request arguments for a debug line: buffers by their size, not their bytes."""
    shown = (f"<{len(a)} bytes>" if isinstance(a, bytes | memoryview) and len(a) > 64 else repr(a)
             for a in args if not isinstance(a, pyfuse3.RequestContext | pyfuse3.ReaddirToken))
    return "(" + ", ".join(shown) + ")"
