"""The server's connections (cheroot's, extended): each keeps what it reads (`reading.Reads`,
close-to-open)."""

from __future__ import annotations

import logging
import socket
from typing import Any

from cheroot import server as http
from cheroot import wsgi
from cheroot.makefile import MakeFile

from .reading import READS, Reads

log = logging.getLogger("zarrfs.serve")


class Connection(http.HTTPConnection):
    """A connection and what it reads (`Reads`)."""

    server: Server

    def __init__(self, server: Server, sock: socket.socket, makefile: Any = MakeFile) -> None:
        super().__init__(server, sock, makefile)
        self.reads = Reads()


class Gateway(wsgi.Gateway_10):
    """What the application sees of a connection: its `Reads`; once the answer is sent, the
    connection's reading of the file goes on."""

    def respond(self) -> None:
        connection: Connection = self.req.conn
        self.env[READS] = connection.reads
        try:
            super().respond()
        finally:
            connection.reads.ended()


class Server(wsgi.Server):
    """cheroot's WSGI server with these connections, and its errors in the server's log."""

    ConnectionClass = Connection

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.gateway = Gateway

    def error_log(self, msg: str = "", level: int = logging.INFO, traceback: bool = False) -> None:
        log.log(level, "%s", msg, exc_info=traceback and log.isEnabledFor(logging.DEBUG))
