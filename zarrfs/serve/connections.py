"""The server's connections (cheroot's, extended): each keeps what it reads (`reading.Reads`,
close-to-open), and serves its client within deadlines (`deadlines`), on threads that grow
with the connections (`workers`), making its TLS handshake itself (`handshakes`).

cheroot's own timeout bounds each read or send on a socket: a client sending a byte every few
seconds, or reading one, would keep a server thread for ever. Here a connection handed to a
thread has its request line there within a few seconds (`deadlines.FIRST_LINE_SECONDS`) and
its line and headers within `--client-timeout` seconds; its body comes at `MIN_BODY_RATE`
bytes a second or more once that many seconds have passed, however long it is (counted
`BODY_PIECE` bytes at a time); and each block of an answer (a `write` of the application's)
is taken by the client within `--client-timeout` seconds. A client past a deadline has its
connection shut, which ends the read or send that waits for it: the thread serves others.
"""

from __future__ import annotations

import logging
import socket
from typing import Any

from cheroot import server as http
from cheroot import wsgi
from cheroot.makefile import MakeFile

from .deadlines import Deadlines, Watch
from .handshakes import LateHandshakes, handshake
from .reading import READS, Reads
from .workers import PoolGrower

log = logging.getLogger("zarrfs.serve")

MIN_BODY_RATE = 500  # bytes a second a request body arrives at, at least (after the grace)
BODY_PIECE = 8 << 10  # a body is read (and counted) at most this much at a time


class ServedRequest(http.HTTPRequest):
    """A request whose line (after the connection's TLS handshake, if it had none) and
    headers arrive within their deadlines."""

    conn: Connection

    def parse_request(self) -> None:
        deadlines = self.conn.server.deadlines
        self.watch = deadlines.head(self.conn)
        try:
            if self.conn.shake_hands():
                super().parse_request()
        finally:
            deadlines.end(self.watch)

    def read_request_line(self) -> bool:
        try:
            return bool(super().read_request_line())  # type: ignore[no-untyped-call]
        finally:
            self.watch.line_came()


class Connection(http.HTTPConnection):
    """A connection, what it reads (`Reads`), and whether a deadline cut it."""

    RequestHandlerClass = ServedRequest
    server: Server

    def __init__(self, server: Server, sock: socket.socket, makefile: Any = MakeFile) -> None:
        super().__init__(server, sock, makefile)
        self.reads = Reads()
        self.cut = False
        self.shaken = not isinstance(server.ssl_adapter, LateHandshakes)  # (its TLS handshake made)

    def shake_hands(self) -> bool:
        """Whether the connection's TLS handshake is made (now, if not before)."""
        if not self.shaken:
            environ = handshake(self.socket, self.server.ssl_adapter)
            self.shaken, self.ssl_env = environ is not None, environ
        return self.shaken

    def communicate(self) -> bool:
        """cheroot's, but for a connection cut at a deadline: its end, whatever the socket (a
        TLS one's) says of it, is no error of the server's."""
        try:
            return bool(super().communicate())  # type: ignore[no-untyped-call]
        except OSError:
            if not self.cut:
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
    deadline; each block of the answer is taken within its own. Once the answer is sent, the
    connection's reading of the file goes on."""

    req: ServedRequest

    def respond(self) -> None:
        environ, connection = self.env, self.req.conn
        environ[READS] = connection.reads
        environ["SERVER_ADDR"] = connection.socket.getsockname()[0]  # (as Apache's: for hosts.Hosts)
        deadlines, body = connection.server.deadlines, None
        length = environ.get("CONTENT_LENGTH") or "0"
        if length != "0" or self.req.chunked_read:
            body = deadlines.body(connection, MIN_BODY_RATE)
            declared = None if self.req.chunked_read or not length.isdigit() else int(length)
            environ["wsgi.input"] = Body(environ["wsgi.input"], declared, body, deadlines)
        try:
            super().respond()
        finally:
            connection.reads.ended()
            if body is not None:
                deadlines.end(body)

    def write(self, chunk: bytes) -> None:
        """A block of the answer, sent whole within its deadline (the socket's own timeout,
        which a trickle of reads resets at each `send()`, is lifted meanwhile)."""
        connection = self.req.conn
        block = connection.server.deadlines.answer(connection)
        connection.socket.settimeout(None)
        try:
            super().write(chunk)
        finally:
            connection.server.deadlines.end(block)
            connection.socket.settimeout(connection.server.timeout)


class Server(wsgi.Server):
    """cheroot's WSGI server with these connections, threads that grow with them, and its
    errors in the server's log."""

    ConnectionClass = Connection

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.gateway = Gateway
        self.deadlines = Deadlines(float(self.timeout))
        self.workers: PoolGrower | None = None  # (once prepared)

    def prepare(self) -> None:
        super().prepare()
        self.workers = PoolGrower(self.requests)

    def process_conn(self, conn: Connection) -> None:
        super().process_conn(conn)
        if self.workers is not None:
            self.workers.handed()

    def stop(self) -> None:
        if self.workers is not None:
            self.workers.stop()
        super().stop()
        self.deadlines.stop()

    def error_log(self, msg: str = "", level: int = logging.INFO, traceback: bool = False) -> None:
        if msg.startswith("socket.error"):
            level = min(level, logging.INFO)  # (a client's connection that broke: the client's doing)
        log.log(level, "%s", msg, exc_info=traceback and log.isEnabledFor(logging.DEBUG))
