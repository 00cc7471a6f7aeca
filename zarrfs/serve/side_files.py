"""What Finder writes beside the files it copies or opens: `._NAME` (AppleDouble: a file's
extended attributes and resource fork) and `.DS_Store` (a folder's view settings), in any
directory. A tree of Zarr data has nowhere to keep them, and Finder gives up a copy it
cannot write them for: so they are kept here, in memory for the server's life, never in the
store, and served back as Finder expects (GET, HEAD, PROPFIND, in its directory's listing
too, LOCK, DELETE). Bounded: `MOST_BYTES` each, `MOST_FILES` in all; past that a PUT is 507.
"""

from __future__ import annotations

import errno
import hashlib
import io
import threading
import time
from collections.abc import Iterator
from typing import IO, Any

from wsgidav.dav_error import DAVError
from wsgidav.dav_provider import DAVNonCollection
from wsgidav.util import get_uri_name

from .staging import StagedBody, expected_length
from .statuses import HTTP_FORBIDDEN, HTTP_INSUFFICIENT_STORAGE, HTTP_NOT_FOUND, answering

MOST_BYTES = 1 << 20  # of one file
MOST_FILES = 512  # kept in all


def is_side_file(name: str) -> bool:
    return name == ".DS_Store" or (name.startswith("._") and len(name) > 2)


class SideFiles:
    """The side files kept, by URL path ("/g/a/._data"): (bytes, when written)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._files: dict[str, tuple[bytes, float]] = {}

    def get(self, path: str) -> tuple[bytes, float] | None:
        with self._lock:
            return self._files.get(path)

    def put(self, path: str, data: bytes) -> None:
        """OSError ENOSPC (507) past the bounds."""
        if len(data) > MOST_BYTES:
            raise OSError(errno.ENOSPC, f"{get_uri_name(path)}: Finder's files are kept up to {MOST_BYTES} B")
        with self._lock:
            if path not in self._files and len(self._files) >= MOST_FILES:
                raise OSError(errno.ENOSPC, f"{MOST_FILES} of Finder's files are kept, no more")
            self._files[path] = (data, time.time())

    def delete(self, path: str) -> bool:
        with self._lock:
            return self._files.pop(path, None) is not None

    def moved(self, directory: str, to: str | None) -> None:
        """The group or array at URL path `directory` was moved to `to`, or deleted (None):
        the files kept below it go with it (deleted, none would show again under a new node of
        its name)."""
        old, new = directory.rstrip("/") + "/", None if to is None else to.rstrip("/") + "/"
        with self._lock:
            below = [path for path in self._files if path.startswith(old)]
            for path in below:
                kept = self._files.pop(path)
                if new is not None:
                    self._files[new + path[len(old):]] = kept

    def names_in(self, directory: str) -> list[str]:
        prefix = directory.rstrip("/") + "/"
        with self._lock:
            return [path[len(prefix):] for path in self._files
                    if path.startswith(prefix) and "/" not in path[len(prefix):]]


class SideFile(DAVNonCollection):  # type: ignore[misc]
    """One of Finder's files, kept (or about to be: a PUT's or a LOCK's new one)."""

    def __init__(self, path: str, environ: dict[str, Any], files: SideFiles, read_only: bool) -> None:
        super().__init__(path, environ)
        self._files = files
        self._read_only = read_only
        self._body: StagedBody | None = None

    def _kept(self) -> tuple[bytes, float]:
        return self._files.get(self.path) or (b"", time.time())

    def get_content_length(self) -> int:
        return len(self._kept()[0])

    def get_content_type(self) -> str:
        return "application/octet-stream"

    def get_creation_date(self) -> float:
        return self._kept()[1]

    def get_last_modified(self) -> float:
        return self._kept()[1]

    def get_etag(self) -> str:
        data, when = self._kept()
        return hashlib.blake2b(data + repr(when).encode(), digest_size=8).hexdigest()

    def support_etag(self) -> bool:
        return True

    def support_ranges(self) -> bool:
        return True

    def get_content(self) -> IO[bytes]:
        return io.BytesIO(self._kept()[0])

    def begin_write(self, *, content_type: str | None = None) -> StagedBody:
        self._writable()
        expected = expected_length(self.environ)
        if expected is not None and expected > MOST_BYTES:
            raise DAVError(HTTP_INSUFFICIENT_STORAGE, context_info=f"kept up to {MOST_BYTES} bytes each")
        self._body = StagedBody(None, expected, self._store)
        return self._body

    def _store(self, staged: IO[bytes], size: int) -> None:
        with answering(f"PUT {self.path}"):
            self._files.put(self.path, staged.read(MOST_BYTES + 1))

    def end_write(self, *, with_errors: bool) -> None:
        if self._body is not None:
            self._body.discard()
            self._body = None

    def delete(self) -> None:
        self._writable()
        if not self._files.delete(self.path):
            raise DAVError(HTTP_NOT_FOUND, context_info=self.path)
        self.remove_all_locks(recursive=False)

    def handle_delete(self) -> bool:
        self.delete()
        return True

    def handle_move(self, dest_path: str) -> bool:
        raise DAVError(HTTP_FORBIDDEN, context_info="Finder's files are not moved")

    def handle_copy(self, dest_path: str, *, depth_infinity: bool) -> bool:
        raise DAVError(HTTP_FORBIDDEN, context_info="Finder's files are not copied")

    def _writable(self) -> None:
        if self._read_only:
            raise DAVError(HTTP_FORBIDDEN, context_info="the tree is read-only")


def side_files_in(directory: Any, files: SideFiles, read_only: bool) -> Iterator[SideFile]:
    """The side files kept in a directory resource, as its members."""
    for name in files.names_in(directory.path):
        yield SideFile(directory.path.rstrip("/") + "/" + name, directory.environ, files, read_only)
