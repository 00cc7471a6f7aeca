"""TLS handshakes made by the thread serving a connection, not by the one accepting them.

cheroot's adapter makes the handshake as it accepts the connection, on the one thread that
accepts them all: a client trickling its ClientHello held every new connection. Here the
adapter only wraps the socket (`LateHandshakes.wrap`), and the connection's thread makes the
handshake (`handshake`) under its request's head deadline (`deadlines`), then takes the
environ entries cheroot's adapter would have given (`HTTPS`, `SSL_*`; `wsgi.url_scheme` is
https from the server's adapter alone).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import ssl
from typing import Any

from cheroot.ssl.builtin import BuiltinSSLAdapter

log = logging.getLogger("zarrfs.serve")

PLAIN_HTTP = b"The client sent plain HTTP, but this server speaks only HTTPS.\n"
PLAIN_HTTP_ANSWER = (b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nConnection: close\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(PLAIN_HTTP), PLAIN_HTTP))


class LateHandshakes(BuiltinSSLAdapter):
    """cheroot's adapter, wrapping a connection's socket without its handshake."""

    def wrap(self, sock: socket.socket) -> tuple[ssl.SSLSocket, dict[str, Any]]:
        wrapped = self.context.wrap_socket(sock, do_handshake_on_connect=False, server_side=True)
        return wrapped, {}


def handshake(sock: socket.socket, adapter: LateHandshakes) -> dict[str, Any] | None:
    """The handshake of `sock` (a socket `adapter` wrapped), and the environ entries of the
    connection; None if there is none (the client's doing: logged, and the connection is to
    be closed). A client speaking plain HTTP is told to speak HTTPS."""
    assert isinstance(sock, ssl.SSLSocket)
    try:
        sock.do_handshake()
    except ssl.SSLError as error:
        log.info("a client's TLS handshake failed (%s): its connection is closed", error.reason or error)
        if error.reason == "HTTP_REQUEST":
            with_plain_answer(sock)
        return None
    except OSError as error:  # (gone, silent past its timeout, or cut at its deadline)
        log.info("a client's TLS handshake did not end (%s): its connection is closed", error)
        return None
    return dict(adapter.get_environ(sock))  # type: ignore[no-untyped-call]


def with_plain_answer(sock: ssl.SSLSocket) -> None:
    with contextlib.suppress(OSError):  # (gone already)
        # (on the socket itself: the client speaks no TLS)
        socket.socket.sendall(sock, PLAIN_HTTP_ANSWER)
