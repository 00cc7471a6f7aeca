"""Clients that cannot hold the server (issue 94, point 2): 64 connections each sending half a
request line, and a reader taking nothing of a 64 MiB answer, leave another client answered
within a second; the idle ones are dropped at their first line's deadline (not the client
timeout), the reader at its block's deadline. A reader trickling its reads is cut at the
deadline of the block it holds (a socket's timeout, reset by each `send()`, would let it run
on); a client trickling its TLS ClientHello (or silent) delays no other TLS client's answer,
and is dropped at its first line's deadline.

The 1 s is the issue's figure: the median of three answers asked at once, each timed by curl
from its connect (a loaded 2-core machine can stall one of them)."""

from __future__ import annotations

import contextlib
import select
import socket
import statistics
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import pytest
import zarr

from tests.helpers.certificates import self_signed
from tests.helpers.serving import Server, curl, served

IDLE = 64
ANSWER_SECONDS = 1.0  # (the figure)
FIRST_LINE_SECONDS = 5.0  # (zarrfs.serve.deadlines')
BIG = 64 << 20  # bytes of /big/data


@pytest.fixture
def group(tmp_path: Path) -> Path:
    root = zarr.open_group(tmp_path / "g.zarr", mode="w", zarr_format=3)
    root.create_array("a", shape=(8,), chunks=(4,), dtype="u1")[...] = np.arange(8, dtype="u1")
    root.create_array("big", shape=(BIG,), chunks=(1 << 20,), dtype="u1", fill_value=7)  # (none stored)
    return tmp_path / "g.zarr"


def test_idle_clients_and_a_slow_reader_leave_another_answered(group: Path, tmp_path: Path) -> None:
    with served(group, tmp_path, args=["--client-timeout", "10"]) as server:
        began = time.monotonic()
        with connections(server, IDLE) as idle:
            for client in idle:
                client.sendall(b"GET /zarr.json HT")  # (half a request line, and nothing more)
            with connections(server, 1) as (reader,):
                asked = time.monotonic()
                reader.sendall(request(server, "/big/data"))  # (and nothing of the answer read)
                assert median_answer_seconds(server.url + "zarr.json") < ANSWER_SECONDS
                dropped = seconds_to_end(idle, began)
                assert min(dropped) > FIRST_LINE_SECONDS - 0.5 and max(dropped) < 9, dropped
                cut = seconds_to_log(server, "read its answer too slowly", asked)
                assert 10 - 0.5 < cut < 10 + 8, cut  # (--client-timeout, and a loaded machine)
                assert 0 < drained(reader) < BIG
        assert curl(server.url + "a/data").stdout == bytes(range(8))
        assert server.log().count("its request line not all sent") == IDLE
        assert "Traceback" not in server.log()


def test_a_trickling_reader_is_cut_at_its_blocks_deadline(group: Path, tmp_path: Path) -> None:
    """A reader taking 320 KiB a second (most `send()`s of the server's make some headway
    within a socket's timeout) is cut as soon as a block (1 MiB) waits past the client timeout
    once the sockets' buffers are full, while others are served."""
    with served(group, tmp_path, args=["--client-timeout", "2"]) as server:
        reader = socket.socket()
        try:
            reader.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, 1400)  # (a network's segments)
            reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 10)
            reader.settimeout(60)
            reader.connect(address_of(server))
            asked = time.monotonic()
            reader.sendall(request(server, "/big/data"))
            got = 0
            while time.monotonic() - asked < 40 and (piece := received(reader, 40 << 10)):
                got += len(piece)
                time.sleep(0.125)
            held = time.monotonic() - asked
        finally:
            reader.close()
        assert got < BIG and held < 20, (got, held)  # (a few s of buffers, then 2 s; a loaded machine)
        assert "read its answer too slowly" in server.log()
        assert curl(server.url + "a/data").stdout == bytes(range(8))


@pytest.mark.parametrize("hello", [b"", b"\x16\x03\x01\x02\x00"], ids=["silent", "trickling"])
def test_a_slow_tls_handshake_delays_no_other_client(group: Path, tmp_path: Path, hello: bytes) -> None:
    """A client silent after connecting, or sending a ClientHello of 512 bytes a byte every
    half second (never silent for cheroot's timeout), delays no other TLS client."""
    certificate, key = self_signed(tmp_path)
    args = ["--tls-cert", str(certificate), "--tls-key", str(key), "--client-timeout", "10"]
    with served(group, tmp_path, args=args) as server:
        port = address_of(server)[1]
        url = f"https://localhost:{port}/zarr.json"
        trust = ("--cacert", str(certificate), "--resolve", f"localhost:{port}:127.0.0.1")
        with connections(server, 1) as (slow,):
            trickler = Trickler(slow, hello)
            try:
                assert median_answer_seconds(url, *trust) < ANSWER_SECONDS
            finally:
                held = trickler.join()
        assert FIRST_LINE_SECONDS - 0.5 < held < 9, held  # (its first line's deadline, not the 10 s)
        assert curl(*trust, url).stdout.startswith(b"{")
        assert "Traceback" not in server.log()


class Trickler:
    """Sends `start` on `client`, then (if any) a byte every half second, until the server
    ends the connection; `join`: the seconds that took."""

    def __init__(self, client: socket.socket, start: bytes) -> None:
        self._client, self._start = client, start
        self._began = time.monotonic()
        self._ended = self._began + 60.0
        self._thread = threading.Thread(target=self._run)
        self._thread.start()

    def join(self) -> float:
        self._thread.join()
        return self._ended - self._began

    def _run(self) -> None:
        with contextlib.suppress(OSError):  # (the server shut the connection)
            self._client.sendall(self._start)
            while time.monotonic() - self._began < 60:
                if select.select([self._client], [], [], 0.5)[0] and not self._client.recv(4096):
                    break
                if self._start:
                    self._client.sendall(b"\x01")
        self._ended = min(self._ended, time.monotonic())


@contextlib.contextmanager
def connections(server: Server, count: int) -> Iterator[list[socket.socket]]:
    made: list[socket.socket] = []
    try:
        for _ in range(count):
            made.append(socket.create_connection(address_of(server), timeout=60))
        yield made
    finally:
        for client in made:
            client.close()


def address_of(server: Server) -> tuple[str, int]:
    parts = urlsplit(server.url)
    assert parts.hostname is not None and parts.port is not None
    return parts.hostname, parts.port


def request(server: Server, path: str) -> bytes:
    host, port = address_of(server)
    return f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode()


def median_answer_seconds(url: str, *args: str) -> float:
    """The median of three GETs' times, made at once (each meets what holds the server then),
    each from curl's connect to its answer's end."""

    def seconds(_: int) -> float:
        done = curl("-o", "/dev/null", "-w", "%{http_code} %{time_total}", *args, url)
        status, took = done.stdout.split()
        assert status == b"200", done
        return float(took)

    with ThreadPoolExecutor(3) as tries:
        return statistics.median(tries.map(seconds, range(3)))


def seconds_to_end(clients: list[socket.socket], since: float) -> list[float]:
    """When the server ended each client's connection (its end read, or a reset), in seconds
    from `since` (a minute at most)."""
    ends: dict[socket.socket, float] = {}
    while len(ends) < len(clients) and time.monotonic() - since < 60:
        waiting = [client for client in clients if client not in ends]
        for client in select.select(waiting, [], [], 1.0)[0]:
            if not received(client, 4096):
                ends[client] = time.monotonic() - since
    assert len(ends) == len(clients), f"{len(clients) - len(ends)} connections not ended in a minute"
    return list(ends.values())


def seconds_to_log(server: Server, text: str, since: float) -> float:
    while text not in server.log():
        assert time.monotonic() - since < 60, f"{text!r} not logged in a minute"
        time.sleep(0.1)
    return time.monotonic() - since


def drained(client: socket.socket) -> int:
    """The bytes left to read on `client`, once its server ended it."""
    got = 0
    while piece := received(client, 1 << 20):
        got += len(piece)
    return got


def received(client: socket.socket, size: int) -> bytes:
    """What `client` received (b"" at the connection's end or reset)."""
    try:
        return client.recv(size)
    except (ConnectionResetError, TimeoutError):
        return b""
