"""A small real HTTP server for tests: serves a local directory on 127.0.0.1 as a CDN or a
bucket website endpoint does.

What `python -m http.server` lacks and fsspec's HTTPFileSystem needs: byte ranges (`Range:
bytes=a-b`, `bytes=a-`, `bytes=-n`, answered 206 with `Content-Range`, or 416 past the end;
a server that ignored them would hand fsspec the whole object for every partial read), and
an `ETag`. Directory URLs get no listing (403 or 404, as chosen) unless `listings` is set;
then they get http.server's HTML index, which fsspec parses. Every request is recorded, so a
test can count what a mount asked for.
"""

from __future__ import annotations

import contextlib
import http.server
import os
import re
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_RANGE = re.compile(r"bytes=(\d*)-(\d*)$")


@dataclass
class Server:
    """A running server: `url` is the address of the served directory's root."""

    url: str
    directory: Path
    listings: bool
    directory_status: int
    requests: list[tuple[str, str]] = field(default_factory=list)  # (method, path)
    lock: threading.Lock = field(default_factory=threading.Lock)
    unavailable: int = 0  # the next N requests are answered 503 (a store briefly overloaded)

    def record(self, method: str, path: str) -> None:
        with self.lock:
            self.requests.append((method, path))

    def count(self, path_prefix: str = "/") -> int:
        """Requests so far for paths starting with `path_prefix` (e.g. "/image.zarr/nope/")."""
        with self.lock:
            return sum(1 for _, path in self.requests if path.startswith(path_prefix))

    def take_unavailable(self) -> bool:
        """Whether this request is one of the `unavailable` ones (counted down)."""
        with self.lock:
            if self.unavailable <= 0:
                return False
            self.unavailable -= 1
            return True

    def paths(self) -> list[str]:
        with self.lock:
            return [path for _, path in self.requests]


class _Handler(http.server.SimpleHTTPRequestHandler):
    server_state: Server  # set on the subclass each server gets

    def log_message(self, format: str, *args: object) -> None:
        pass  # (stderr would fill the test output)

    def do_HEAD(self) -> None:
        self._answer(body=False)

    def do_GET(self) -> None:
        self._answer(body=True)

    def _answer(self, *, body: bool) -> None:
        state = self.server_state
        path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
        state.record(self.command, path)
        if state.take_unavailable():
            self._status(503)
            return
        local = self.translate_path(path)
        if os.path.isdir(local):
            if state.listings and body:
                super().do_GET()
            elif state.listings:
                super().do_HEAD()
            else:
                self._status(state.directory_status)
            return
        try:
            with open(local, "rb") as f:
                content = f.read()
                stat = os.fstat(f.fileno())
        except OSError:
            self._status(404)
            return
        self._send_file(content, f'"{stat.st_mtime_ns:x}-{stat.st_size:x}"', body)

    def _send_file(self, content: bytes, etag: str, body: bool) -> None:
        wanted = self.headers.get("Range")
        start, end = 0, len(content)
        status = 200
        if wanted is not None:
            parsed = _byte_range(wanted, len(content))
            if parsed is None:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(content)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            (start, end), status = parsed, 206
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(end - start))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", etag)
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{len(content)}")
        self.end_headers()
        if body:
            self.wfile.write(content[start:end])

    def _status(self, status: int) -> None:
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()


def _byte_range(header: str, size: int) -> tuple[int, int] | None:
    """[start, end) of one `bytes=` range, clamped to the object (RFC 9110 14.1.2), or None
    when it is unsatisfiable."""
    match = _RANGE.match(header.strip())
    if match is None or match.groups() == ("", ""):
        return None
    first, last = match.groups()
    if not first:  # a suffix: the last `last` bytes
        length = min(int(last), size)
        return (size - length, size) if length else None
    start = int(first)
    end = size if not last else min(int(last) + 1, size)
    return (start, end) if start < size and start < end else None


class _Listening(http.server.ThreadingHTTPServer):
    # socketserver's backlog of 5 drops the connections of a burst of requests (a mount's
    # reads in flight at once); each dropped one waits for the kernel's SYN retries, 1 s then
    # 3 s, 7 s...: a server on the internet answers them.
    request_queue_size = 128


@contextlib.contextmanager
def answering(handler: Callable[..., http.server.BaseHTTPRequestHandler],
              address: tuple[str, int] = ("127.0.0.1", 0)) -> Iterator[int]:
    """An HTTP server at `address` (a loopback one; port 0: any free port) answering with
    `handler`, in a thread of its own for the duration of the block: its port."""
    httpd = _Listening(address, handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(httpd.server_address[1])
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(10)


@contextlib.contextmanager
def serving(directory: Path, *, listings: bool = False, directory_status: int = 404,
            address: tuple[str, int] = ("127.0.0.1", 0)) -> Iterator[Server]:
    """Serve `directory` at `address` for the duration of the block."""
    state = Server("", directory, listings, directory_status)
    handler = type("Handler", (_Handler,), {"server_state": state})

    def make(*args: Any) -> _Handler:
        made: _Handler = handler(*args, directory=str(directory))
        return made

    with answering(make, address) as port:
        state.url = f"http://{address[0]}:{port}"
        yield state
