"""A new `NAME.npy` locked before it is written (Windows, Office, davfs2: LOCK, PUT, UNLOCK):
the name is held by its lock alone, nothing of it is in the tree. It is found (an empty file)
while a lock is on its URL; its PUT makes the array as a PUT of a new name does. When its
lock ends, or its PUT fails (which ends its locks), the name is free again."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from wsgidav.dav_error import DAVError
from wsgidav.dav_provider import DAVNonCollection

from .statuses import HTTP_FORBIDDEN

Make = Callable[[dict[str, Any]], Any]  # (a request's environ) -> the new file's resource, begun


class Reservations:
    """The URL paths of new names taken by a LOCK, and how each is made."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._made: dict[str, Make] = {}

    def take(self, path: str, make: Make) -> None:
        with self._lock:
            self._made[path] = make

    def found(self, path: str, environ: dict[str, Any], lock_manager: Any) -> Reserved | None:
        with self._lock:
            make = self._made.get(path)
        if make is None:
            return None
        if lock_manager is None or not lock_manager.is_url_locked(quote(path)):
            with self._lock:
                self._made.pop(path, None)  # (its lock ended: the name is free)
            return None
        return Reserved(path, environ, make)


class Reserved(DAVNonCollection):  # type: ignore[misc]
    """The locked new name, empty until its PUT."""

    def __init__(self, path: str, environ: dict[str, Any], make: Make) -> None:
        super().__init__(path, environ)
        self._make = make
        self._file: Any = None  # (the new file, once its PUT began)

    def get_content_length(self) -> int:
        return 0 if self._file is None else int(self._file.get_content_length())

    def get_content_type(self) -> str:
        return "application/x-npy"

    def get_etag(self) -> str | None:
        return None if self._file is None else str(self._file.get_etag())

    def support_etag(self) -> bool:
        return self._file is not None

    def get_last_modified(self) -> float | None:
        return None

    def begin_write(self, *, content_type: str | None = None) -> Any:
        self._file = self._make(self.environ)
        return self._file.begin_write(content_type=content_type)

    def end_write(self, *, with_errors: bool) -> None:
        if self._file is not None:
            self._file.end_write(with_errors=with_errors)

    def get_content(self) -> Any:
        raise DAVError(HTTP_FORBIDDEN, context_info="nothing is written there yet")
