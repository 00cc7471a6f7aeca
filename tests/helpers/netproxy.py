"""A TCP proxy on 127.0.0.1 that delays or swallows traffic: the network a remote store is
reached through, made bad on purpose (no mock of the server: the server is real).

- `delay`: each piece of data waits `delay` seconds in each direction before it is passed on,
  without slowing the stream (pieces are pipelined): a request and its answer cost a round
  trip of 2 x `delay` on top of the server's time.
- `swallow()`: a partition. Connections are accepted and data is read, but nothing is passed
  on and nothing answered; open connections go silent the same way. `heal()` ends it: the
  connections that were silenced are closed (their streams lost bytes), new ones pass again.

Counts what it passed (`requests`: pieces sent from client to server; `downloaded`: bytes
sent from server to client, headers included), so a test can count a client's requests and
what they fetched.

With `tls` (a server-side SSLContext) it is an HTTPS front for a plain HTTP server: clients
connect with TLS, the server behind it is reached in the clear (`url` is then https).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import threading
import time
from collections.abc import Iterator
from typing import Any


class TcpProxy:
    def __init__(self, target_port: int, *, delay: float = 0.0, host: str = "127.0.0.1",
                 tls: ssl.SSLContext | None = None) -> None:
        self.target = (host, target_port)
        self.delay = delay
        self.tls = tls
        self.port = 0
        self.requests = 0
        self.downloaded = 0
        self._swallowing = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter | None]] = set()

    @property
    def url(self) -> str:
        scheme = "http" if self.tls is None else "https"
        return f"{scheme}://127.0.0.1:{self.port}"

    def start(self) -> TcpProxy:
        started = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(started,), daemon=True, name="proxy")
        self._thread.start()
        if not started.wait(10):
            raise RuntimeError("the proxy did not start")
        return self

    def stop(self) -> None:
        loop = self._loop
        if loop is None:
            return
        asyncio.run_coroutine_threadsafe(self._close_all(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        assert self._thread is not None
        self._thread.join(10)
        self._loop = None

    def swallow(self) -> None:
        """From now on nothing passes, in either direction, on any connection."""
        self._swallowing = True

    def heal(self) -> None:
        """Traffic passes again; the connections silenced meanwhile are closed."""
        assert self._loop is not None
        asyncio.run_coroutine_threadsafe(self._heal(), self._loop).result(10)

    # -- the event loop's side ---------------------------------------------------------------

    def _run(self, started: threading.Event) -> None:
        loop = self._loop = asyncio.new_event_loop()
        listening = asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.tls)
        self._server = loop.run_until_complete(listening)
        self.port = self._server.sockets[0].getsockname()[1]
        started.set()
        try:
            loop.run_forever()
        finally:
            self._server.close()
            with contextlib.suppress(Exception):
                loop.run_until_complete(self._server.wait_closed())
            loop.close()

    async def _heal(self) -> None:
        # One step on the loop: a connection accepted between closing the silenced ones and
        # passing traffic again would stay silent for good (a client's request on it then
        # waits for its deadline after the heal).
        self._swallowing = False
        await self._close_all()

    async def _close_all(self) -> None:
        for client, upstream in list(self._connections):
            client.close()
            if upstream is not None:
                upstream.close()
        self._connections.clear()

    async def _serve(self, client_in: asyncio.StreamReader, client_out: asyncio.StreamWriter) -> None:
        if self._swallowing:
            entry: tuple[asyncio.StreamWriter, asyncio.StreamWriter | None] = (client_out, None)
            self._connections.add(entry)
            await _drain_forever(client_in)
            return
        try:
            server_in, server_out = await asyncio.open_connection(*self.target)
        except OSError:
            client_out.close()
            return
        entry = (client_out, server_out)
        self._connections.add(entry)
        try:
            await asyncio.gather(self._pipe(client_in, server_out, upstream=True),
                                 self._pipe(server_in, client_out, upstream=False))
        finally:
            self._connections.discard(entry)
            client_out.close()
            server_out.close()

    async def _pipe(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter, *,
                    upstream: bool) -> None:
        """Pass data on after `delay`, pipelined: a queue of (due time, piece)."""
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()
        sender = asyncio.ensure_future(self._send(queue, sink))
        try:
            while True:
                try:
                    piece = await source.read(1 << 16)
                except (ConnectionError, OSError):
                    break
                if not piece:
                    break
                if self._swallowing:
                    continue
                if upstream:
                    self.requests += 1
                else:
                    self.downloaded += len(piece)
                queue.put_nowait((time.monotonic() + self.delay, piece))
        finally:
            queue.put_nowait((0.0, b""))
            with contextlib.suppress(Exception):
                await sender

    async def _send(self, queue: asyncio.Queue[tuple[float, bytes]], sink: asyncio.StreamWriter) -> None:
        while True:
            due, piece = await queue.get()
            if not piece:
                with contextlib.suppress(Exception):
                    sink.write_eof()
                return
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            if self._swallowing:
                continue
            sink.write(piece)
            try:
                await sink.drain()
            except (ConnectionError, OSError):
                return


async def _drain_forever(reader: asyncio.StreamReader) -> None:
    with contextlib.suppress(ConnectionError, OSError):
        while await reader.read(1 << 16):
            pass


@contextlib.contextmanager
def proxied(target_port: int, **options: Any) -> Iterator[TcpProxy]:
    """A running proxy to `target_port`, stopped at the end whatever happens."""
    proxy = TcpProxy(target_port, **options).start()
    try:
        yield proxy
    finally:
        proxy.stop()
