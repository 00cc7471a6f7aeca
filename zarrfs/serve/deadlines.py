"""Deadlines on what a client sends and takes: a thread that shuts the connection of a client
past one, which ends the read or the send its server thread waits in (the thread serves
others).

Three kinds (`Deadlines.head`, `body`, `answer`):
- a request's head: its line within `FIRST_LINE_SECONDS` (at most the client timeout) of the
  connection's hand-off to a thread (a TLS handshake included), and the line and headers
  within the client timeout;
- a request's body: the client timeout, and a second more for each `rate` bytes that came
  (as Apache's mod_reqtimeout, `body=20,MinRate=500`);
- a block of an answer: taken whole by the client within the client timeout, however it
  trickles its reads (a socket's own timeout bounds each `send()`, which a trickle resets).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from typing import Protocol

log = logging.getLogger("zarrfs.serve")

FIRST_LINE_SECONDS = 5.0  # (as Apache's mod_reqtimeout: `handshake=5`, and the first byte soon after)
WATCH_SECONDS = 0.25  # how often the deadlines are looked at


class Watched(Protocol):
    """A connection a deadline can cut: its socket, and whether it was cut."""

    socket: socket.socket
    cut: bool


class Watch:
    """One deadline: by when a connection's client must have sent (or taken) what it did."""

    def __init__(self, connection: Watched, seconds: float, what: str, rate: float | None = None) -> None:
        self.connection = connection
        self.start = time.monotonic()
        self.seconds = seconds
        self.what = what  # ("head", "body" or "answer")
        self.rate = rate  # (None: all by the seconds' end; else a second more per `rate` bytes)
        self.received = 0
        self.line_by: float | None = None  # (a head's: its line by then, until the line came)

    @property
    def deadline(self) -> float:
        end = self.start + self.seconds + (0.0 if self.rate is None else self.received / self.rate)
        return end if self.line_by is None else min(end, self.line_by)

    def line_came(self) -> None:
        self.line_by = None

    def describe(self, now: float) -> str:
        took = f"{now - self.start:.0f} s"
        if self.what == "answer":
            return f"a client read its answer too slowly (a block of it not all taken in {took})"
        if self.what == "body":
            return f"a client sent its request too slowly ({self.received} bytes of its body sent in {took})"
        sent = "its request line" if self.line_by is not None else "its request line and headers"
        return f"a client sent its request too slowly ({sent} not all sent in {took})"


class Deadlines:
    """The deadlines running, and a thread that cuts the connection of each one missed."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.first_line_seconds = min(FIRST_LINE_SECONDS, seconds)
        self._watches: set[Watch] = set()
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="client deadlines", daemon=True)
        self._thread.start()

    def head(self, connection: Watched) -> Watch:
        found = Watch(connection, self.seconds, "head")
        found.line_by = found.start + self.first_line_seconds
        return self._add(found)

    def body(self, connection: Watched, rate: float) -> Watch:
        return self._add(Watch(connection, self.seconds, "body", rate))

    def answer(self, connection: Watched) -> Watch:
        return self._add(Watch(connection, self.seconds, "answer"))

    def end(self, watch: Watch) -> None:
        with self._lock:
            self._watches.discard(watch)

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join()

    def _add(self, watch: Watch) -> Watch:
        with self._lock:
            self._watches.add(watch)
        return watch

    def _run(self) -> None:
        while not self._stopped.wait(WATCH_SECONDS):
            now = time.monotonic()
            with self._lock:
                late = [watch for watch in self._watches if watch.deadline < now]
                self._watches.difference_update(late)
            for watch in late:
                watch.connection.cut = True
                log.info("%s: its connection is closed", watch.describe(now))
                with contextlib.suppress(OSError):  # (gone already)
                    # (the socket's own shutdown: a TLS socket's would talk TLS, from this thread)
                    socket.socket.shutdown(watch.connection.socket, socket.SHUT_RDWR)
