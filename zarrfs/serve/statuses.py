"""Where errors become HTTP statuses (one place, as `fuse.boundary` maps them to errno values):
what a mount refuses, the server refuses with the status that means it (403, 405, 409, 412,
423, 507), a store that fails is 503, a corrupt chunk 502; never a 500 with a traceback."""

from __future__ import annotations

import contextlib
import errno
import logging
from collections.abc import Iterator
from http import HTTPStatus

from wsgidav.dav_error import DAVError

from ..errors import (
    ChunkError,
    ConflictError,
    EditRefused,
    MetadataError,
    ReadOnlyError,
    ResizeError,
    StoreError,
    ZarrfsError,
)
from ..views import FileTooLargeError
from ..views.files import FixedBytesError

log = logging.getLogger("zarrfs.serve")

HTTP_BAD_GATEWAY = HTTPStatus.BAD_GATEWAY.value
HTTP_CONFLICT = HTTPStatus.CONFLICT.value
HTTP_FORBIDDEN = HTTPStatus.FORBIDDEN.value
HTTP_INSUFFICIENT_STORAGE = HTTPStatus.INSUFFICIENT_STORAGE.value
HTTP_LENGTH_REQUIRED = HTTPStatus.LENGTH_REQUIRED.value
HTTP_METHOD_NOT_ALLOWED = HTTPStatus.METHOD_NOT_ALLOWED.value
HTTP_NOT_FOUND = HTTPStatus.NOT_FOUND.value
HTTP_PRECONDITION_FAILED = HTTPStatus.PRECONDITION_FAILED.value
HTTP_SERVICE_UNAVAILABLE = HTTPStatus.SERVICE_UNAVAILABLE.value
# What an edit's errno means to an HTTP client (EditRefused: the tree's refusal, as a mount's).
BY_ERRNO = {
    errno.EEXIST: HTTP_METHOD_NOT_ALLOWED,  # (MKCOL of a name in use: RFC 4918, 9.3.1)
    errno.ENOTEMPTY: HTTP_CONFLICT, errno.ENOTDIR: HTTP_CONFLICT, errno.EISDIR: HTTP_CONFLICT,
    errno.ENOENT: HTTP_CONFLICT, errno.EINVAL: HTTP_CONFLICT, errno.EXDEV: HTTP_CONFLICT,
    errno.ENAMETOOLONG: HTTP_CONFLICT,
    errno.EPERM: HTTP_FORBIDDEN, errno.EACCES: HTTP_FORBIDDEN, errno.EROFS: HTTP_FORBIDDEN,
    errno.ENOSPC: HTTP_INSUFFICIENT_STORAGE, errno.EDQUOT: HTTP_INSUFFICIENT_STORAGE,
    errno.EFBIG: HTTP_CONFLICT,
}


def status_for(error: BaseException) -> int:
    """The one place where errors become HTTP statuses."""
    if isinstance(error, EditRefused):
        return BY_ERRNO.get(error.errno, HTTP_CONFLICT)
    if isinstance(error, ReadOnlyError | FixedBytesError):
        return HTTP_FORBIDDEN
    if isinstance(error, ConflictError):
        return HTTP_PRECONDITION_FAILED  # (another writer's change won the compare-and-swap)
    if isinstance(error, FileTooLargeError | ResizeError):
        return HTTP_CONFLICT
    if isinstance(error, StoreError) and error.errno in BY_ERRNO:
        return BY_ERRNO[error.errno]
    if isinstance(error, StoreError):
        return HTTP_SERVICE_UNAVAILABLE
    if isinstance(error, ChunkError | MetadataError):
        return HTTP_BAD_GATEWAY  # (what the store holds cannot be read: the region, not the server)
    if isinstance(error, FileNotFoundError):
        return HTTP_NOT_FOUND
    if isinstance(error, PermissionError):
        return HTTP_FORBIDDEN
    if isinstance(error, OSError) and error.errno in BY_ERRNO:
        return BY_ERRNO[error.errno]
    if isinstance(error, ValueError):
        return HTTP_CONFLICT  # (a body that does not fit its file: `staging`, `uploads`)
    return HTTP_SERVICE_UNAVAILABLE


@contextlib.contextmanager
def answering(what: str) -> Iterator[None]:
    """Errors of the tree, its views and the store, as the DAVError of their status."""
    try:
        yield
    except DAVError:
        raise
    except (ZarrfsError, OSError, ValueError) as e:
        status = status_for(e)
        level = logging.INFO if status in (HTTP_FORBIDDEN, HTTP_CONFLICT, HTTP_METHOD_NOT_ALLOWED) \
            else logging.ERROR
        log.log(level, "%s: %s", what, e)
        raise DAVError(status, context_info=str(e)) from None
