"""The server's connections (cheroot's, extended): each keeps what it reads (`reading.Reads`,
close-to-open) and has its request read within a deadline.

cheroot's own timeout bounds each read of a socket: a client sending a byte every few
seconds would keep a server thread for ever. Here a request's line and headers must all
arrive within `--client-timeout` seconds of their first byte, and its body at
`MIN_BODY_RATE` bytes a second or more once that many seconds have passed, however long it
is (as Apache's mod_reqtimeout, `body=20,MinRate=500`; the body is counted `BODY_PIECE`
bytes at a time). A client past its deadline has its connection shut, which ends the read
that waits for it: the thread serves others. (Sending the answer is bounded by cheroot's
timeout: each block is sent within it, or the connection goes.)
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from typing import Any

from cheroot import server as http
from cheroot import wsgi
from cheroot.makefile import MakeFile

from .reading import READS, Reads

log = logging.getLogger("zarrfs.serve")

MIN_BODY_RATE = 500  # bytes a second a request body arrives at, at least (after the grace)
BODY_PIECE = 8 << 10  # a body is read (and counted) at most this much at a time
WATCH_SECONDS = 0.25  # how often the deadlines are looked at


class Watch:
    """A request being read: by when its client must have sent what it sent."""

    def __init__(self, sock: socket.socket, grace: float, rate: float | None) -> None:
        self.sock = sock
        self.start = time.monotonic()
        self.grace = grace
        self.rate = rate  # (None: all by the grace's end; else the grace, and a second a `rate` bytes)
        self.received = 0
        self.late = False  # (its connection was shut)

    @property
    def deadline(self) -> float:
        return self.start + self.grace + (0.0 if self.rate is None else self.received / self.rate)

    def describe(self, now: float) -> str:
        if self.rate is None:
            return f"its request line and headers not all sent in {now - self.start:.0f} s"
        return f"{self.received} bytes of its body sent in {now - self.start:.0f} s"


class Deadlines:
    """The requests being read, and a thread that shuts the connection of each one late."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._watches: set[Watch] = set()
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="request deadlines", daemon=True)
        self._thread.start()

    def watch(self, sock: socket.socket, *, rate: float | None = None) -> Watch:
        found = Watch(sock, self.seconds, rate)
        with self._lock:
            self._watches.add(found)
        return found

    def end(self, watch: Watch) -> None:
        with self._lock:
            self._watches.discard(watch)

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stopped.wait(WATCH_SECONDS):
            now = time.monotonic()
            with self._lock:
                late = [watch for watch in self._watches if watch.deadline < now]
                self._watches.difference_update(late)
            for watch in late:
                watch.late = True
                log.info("a client sent its request too slowly (%s): its connection is closed",
                         watch.describe(now))
                with contextlib.suppress(OSError):  # (gone already)
                    # (the socket's own shutdown: a TLS socket's would talk TLS, from this thread)
                    socket.socket.shutdown(watch.sock, socket.SHUT_RDWR)


class ServedRequest(http.HTTPRequest):
    """A request whose line and headers arrive within the deadline."""

    conn: Connection

    def parse_request(self) -> None:
        deadlines = self.conn.server.deadlines
        watch = self.conn.watch = deadlines.watch(self.conn.socket)
        try:
            super().parse_request()
        finally:
            deadlines.end(watch)


class Connection(http.HTTPConnection):
    """A connection and what it reads (`Reads`)."""

    RequestHandlerClass = ServedRequest
    server: Server

    def __init__(self, server: Server, sock: socket.socket, makefile: Any = MakeFile) -> None:
        super().__init__(server, sock, makefile)
        self.reads = Reads()
        self.watch: Watch | None = None  # (of the request being read)

    def communicate(self) -> bool:
        """cheroot's, but for a connection shut at its deadline: its end, whatever the
        socket (a TLS one's) says of it, is no error of the server's."""
        try:
            return bool(super().communicate())  # type: ignore[no-untyped-call]
        except OSError:
            if self.watch is None or not self.watch.late:
                raise
            return False


class Body:
    """A request's body (`wsgi.input`), counted as it arrives, read within its deadline; once
    all of it came (its length, or the end of a chunked one), the deadline is no more."""

    def __init__(self, body: Any, length: int | None, watch: Watch, deadlines: Deadlines) -> None:
        self._body = body
        self._length = length
        self._watch = watch
        self._deadlines = deadlines

    def read(self, size: int | None = None) -> bytes:
        """Up to `size` bytes (None, or less than 0: all), read a piece at a time (a read
        waits until all it asks for came, and the deadline moves as pieces come)."""
        pieces = []
        left = -1 if size is None or size < 0 else size
        while left:
            piece = self._counted(self._body.read(BODY_PIECE if left < 0 else min(left, BODY_PIECE)))
            if not piece:
                break
            pieces.append(piece)
            left -= len(piece) if left > 0 else 0
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)

    def readline(self, size: int | None = None) -> bytes:
        return self._counted(self._body.readline(size))

    def _counted(self, data: bytes) -> bytes:
        self._watch.received += len(data)
        if not data or (self._length is not None and self._watch.received >= self._length):
            self._deadlines.end(self._watch)
        return data


class Gateway(wsgi.Gateway_10):
    """What the application sees of a connection: its `Reads`, and its body within its
    deadline; once the answer is sent, the connection's reading of the file goes on."""

    req: ServedRequest

    def respond(self) -> None:
        environ, connection = self.env, self.req.conn
        environ[READS] = connection.reads
        environ["SERVER_ADDR"] = connection.socket.getsockname()[0]  # (as Apache's: for hosts.Hosts)
        deadlines, body = connection.server.deadlines, None
        length = environ.get("CONTENT_LENGTH") or "0"
        if length != "0" or self.req.chunked_read:
            body = connection.watch = deadlines.watch(connection.socket, rate=MIN_BODY_RATE)
            declared = None if self.req.chunked_read or not length.isdigit() else int(length)
            environ["wsgi.input"] = Body(environ["wsgi.input"], declared, body, deadlines)
        try:
            super().respond()
        finally:
            connection.reads.ended()
            if body is not None:
                deadlines.end(body)


class Server(wsgi.Server):
    """cheroot's WSGI server with these connections, and its errors in the server's log."""

    ConnectionClass = Connection

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.gateway = Gateway
        self.deadlines = Deadlines(float(self.timeout))

    def stop(self) -> None:
        super().stop()
        self.deadlines.stop()

    def error_log(self, msg: str = "", level: int = logging.INFO, traceback: bool = False) -> None:
        if msg.startswith("socket.error"):
            level = min(level, logging.INFO)  # (a client's connection that broke: the client's doing)
        log.log(level, "%s", msg, exc_info=traceback and log.isEnabledFor(logging.DEBUG))
