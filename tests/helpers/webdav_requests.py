"""WebDAV requests the tests of `zarrfs serve` make by hand (tests/serve/): a LOCK with its
token, a PUT cut off on a raw socket, a wait for the server's log to say something."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from urllib.parse import urlsplit

from tests.helpers.serving import headers_of

LOCKINFO = ('<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope>'
            '<D:locktype><D:write/></D:locktype></D:lockinfo>')


def lock(url: str) -> tuple[int, str]:
    """LOCK `url` (exclusive, a minute): the status, and the token ("<opaquelocktoken:...>")."""
    headers = headers_of("-X", "LOCK", "-H", "Timeout: Second-60", "-H", "Depth: 0", "--data", LOCKINFO, url)
    return int(headers.get(":status", "0")), headers.get("lock-token", "")


def cut_put(url: str, length: int, sent: bytes, *, hold: bool = False, seconds: float = 60.0) -> None:
    """A PUT of `length` bytes of which only `sent` are sent; then the socket is closed (or,
    `hold`: kept silent until the server closes it, within `seconds`)."""
    where = urlsplit(url)
    with socket.create_connection((where.hostname, where.port), timeout=seconds) as sock:
        sock.sendall(f"PUT {where.path} HTTP/1.1\r\nHost: {where.netloc}\r\nContent-Length: {length}\r\n"
                     "Content-Type: application/octet-stream\r\n\r\n".encode() + sent)
        if hold:
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline and sock.recv(65536):
                pass  # (an answer, if any, then the end the server made)


def wait_for(said: Callable[[], bool], seconds: float = 60.0) -> None:
    """Until `said()` is true (AssertionError after `seconds`)."""
    deadline = time.monotonic() + seconds
    while not said():
        assert time.monotonic() < deadline, "not seen within the deadline"
        time.sleep(0.05)
