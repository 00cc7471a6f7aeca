"""A PUT's body, staged: kept apart until all of it came, then handed on whole, so that a PUT
cut off (a client gone, a short body, a deadline) changes nothing of the store, as Apache,
nginx and rclone write to a temporary file and rename it.

A body is held in memory up to `IN_MEMORY` bytes, past that in a temporary file: in the
directory of the disk cache (`-o disk_cache=`) when there is one, else the system's. The file
is unlinked as it is made (nothing of it outlives the server) and closed with its request. A
disk that fills while a body is staged fails the PUT (507) before anything is stored.

The length a body must have: its Content-Length, or for a chunked body (Finder's) the
`X-Expected-Entity-Length` it says, checked once it ended; a chunked body that says none is
taken whole as it comes.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable
from typing import IO, Any

from wsgidav.dav_error import DAVError

from .statuses import HTTP_LENGTH_REQUIRED

IN_MEMORY = 1 << 20  # bytes of a body held in memory (more go to a temporary file)

Apply = Callable[[IO[bytes], int], None]  # (the staged body, read from its start; its length)


def expected_length(environ: dict[str, Any]) -> int | None:
    """The length the body must have (None: a chunked body that says none); 411 for a body
    that says neither its length nor that it is chunked."""
    for said in ("HTTP_X_EXPECTED_ENTITY_LENGTH", "CONTENT_LENGTH"):
        value = (environ.get(said) or "").strip()
        if value.isdigit():
            return int(value)
    if "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower():
        return None
    raise DAVError(HTTP_LENGTH_REQUIRED, context_info="a PUT says its length, or sends its body chunked")


class StagedBody:
    """The file-like object a PUT writes its body into (`write`, or `writelines` of the
    body's pieces); `close` checks it is whole (`expected` bytes, when a length was said)
    and only then hands it to `apply`; `discard` drops it."""

    def __init__(self, directory: str | None, expected: int | None, apply: Apply) -> None:
        self._file: IO[bytes] = tempfile.SpooledTemporaryFile(  # noqa: SIM115 - `discard` closes it
            max_size=IN_MEMORY, dir=directory)
        self._expected = expected
        self._apply = apply
        self._size = 0

    def write(self, data: bytes) -> int:
        if self._expected is not None and self._size + len(data) > self._expected:
            raise ValueError(f"the body runs past its declared length ({self._expected} bytes)")
        self._file.write(data)
        self._size += len(data)
        return len(data)

    def writelines(self, pieces: Iterable[bytes]) -> None:
        for piece in pieces:
            self.write(piece)

    def close(self) -> None:
        try:
            if self._expected is not None and self._size != self._expected:
                raise ValueError(f"the body ended at {self._size} bytes, not at {self._expected}: "
                                 "nothing was stored")
            self._file.seek(0)
            self._apply(self._file, self._size)
        finally:
            self.discard()

    def discard(self) -> None:
        self._file.close()
