"""Close-to-open over HTTP: which GET is an open of its file.

A mount checks a file for other writers' changes at every open (`-o recheck=open`), then
serves the reads of that open from what it has (and with `recheck=SECONDS`, checks the open
files again every SECONDS). HTTP has no open: every request stands alone. A reader of tiles
(GDAL's /vsicurl/, a web viewer) asks for a file's header, then for each tile, on one
keep-alive connection, as a mount's reader makes one open and many preads. So here a request
is an open of its file unless it *continues* its connection's reading of that file: a range
GET (or HEAD) of a file the same connection read, within `CONTINUED_WITHIN` seconds of the
end of that request, asking no revalidation (`If-None-Match`, `If-Modified-Since`), and with
`recheck=SECONDS`, less than SECONDS after the file was last checked for that connection. A
request for the whole file, a new connection, a pause or a revalidation is an open, checked
before it is answered: no reader gets bytes older than its open, and a reader's many range
GETs cost one check, as a mount's preads do.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

READS = "zarrfs.reads"  # the environ key of the connection's `Reads`
CONTINUED_WITHIN = 1.0  # seconds from the end of a request to the next that continues it
FILES_KEPT = 8  # files a connection's reading is remembered of
REVALIDATIONS = ("HTTP_IF_NONE_MATCH", "HTTP_IF_MODIFIED_SINCE", "HTTP_IF_MATCH", "HTTP_IF_UNMODIFIED_SINCE")


class Reads:
    """What one connection reads: for each file it read lately, when the last request for it
    ended and when it was last checked for other writers' changes (`time.monotonic`)."""

    def __init__(self) -> None:
        self._files: OrderedDict[str, tuple[float, float]] = OrderedDict()
        self._current: tuple[str, float] | None = None  # (the file this request reads, checked at)
        self._lock = threading.Lock()  # (one request at a time per connection; a stop may cut in)

    def continues(self, path: str, environ: Mapping[str, Any], recheck: float | None) -> bool:
        """Whether the request (for the file at URL `path`) continues this connection's
        reading of it: then it is not an open, and is answered from what the server has."""
        if environ.get("REQUEST_METHOD") not in ("GET", "HEAD") or "HTTP_RANGE" not in environ:
            return False
        if any(name in environ for name in REVALIDATIONS):
            return False
        now = time.monotonic()
        with self._lock:
            known = self._files.get(path)
        if known is None:
            return False
        ended, checked = known
        return now - ended <= CONTINUED_WITHIN and not (recheck and now - checked >= recheck)

    def reading(self, path: str, *, checked: bool) -> None:
        """This request reads the file at `path`; `checked`: it was checked now (an open)."""
        with self._lock:
            known = self._files.get(path)
            at = time.monotonic() if checked or known is None else known[1]
            self._current = (path, at)

    def ended(self) -> None:
        """The request was answered (its response sent, or given up)."""
        with self._lock:
            if self._current is None:
                return
            path, checked = self._current
            self._current = None
            self._files[path] = (time.monotonic(), checked)
            self._files.move_to_end(path)
            while len(self._files) > FILES_KEPT:
                self._files.popitem(last=False)
