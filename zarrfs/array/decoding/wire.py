"""Messages between the daemon and its decoding processes, over a Unix stream socket: a small
pickled header, then raw bytes (a job's encoded chunks, a decoder's pickle), and file
descriptors beside them (a slab's shared memory). The bytes are never pickled: a job's chunks
are sent as they lie, from the buffers the store read into.

Only these processes speak it, each end trusting the other (the daemon forked them)."""

from __future__ import annotations

import array
import pickle
import socket
import struct
from collections.abc import Sequence
from typing import Any

from ...codecs import BytesLike

_PREFIX = struct.Struct("!II")  # (header bytes, payload bytes)
MAX_FDS = 253  # (SCM_MAX_FD: a job's files, one message)


class Closed(EOFError):
    """The other end closed the socket (or died)."""


def send(sock: socket.socket, header: Any, payload: Sequence[BytesLike] = (),
         fds: Sequence[int] = ()) -> None:
    """One message; the caller holds the socket's send lock (one sender at a time)."""
    head = pickle.dumps(header, protocol=pickle.HIGHEST_PROTOCOL)
    parts = [memoryview(part).cast("B") for part in payload]
    buffers: list[BytesLike] = [_PREFIX.pack(len(head), sum(len(p) for p in parts)), head, *parts]
    ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
    sent = sock.sendmsg(buffers, ancillary)
    total = sum(len(b) for b in buffers)
    if sent < total:  # (a signal cut it short: the rest follows as plain bytes)
        sock.sendall(b"".join(bytes(b) for b in buffers)[sent:])


def receive(sock: socket.socket, inbox: Inbox | None = None) -> tuple[Any, memoryview, list[int]]:
    """The next message: its header, its payload and the descriptors sent with it (the
    receiver owns and closes them). Closed at the end of the stream. With an `inbox`, the
    payload is a view of its buffer, good until the next message."""
    prefix, fds = _prefix(sock)
    head_size, payload_size = _PREFIX.unpack(prefix)
    head = bytearray(head_size)
    _receive_into(sock, memoryview(head))
    payload = (inbox or Inbox()).room(payload_size)
    _receive_into(sock, payload)
    return pickle.loads(head), payload, fds


class Inbox:
    """One buffer for the payloads of a socket's messages, one after another: a job's chunks
    land in memory already mapped, not in fresh pages for each."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def room(self, size: int) -> memoryview:
        if len(self._buffer) < size:
            self._buffer = bytearray(size)  # (a new one: the last message's view may live on)
        return memoryview(self._buffer)[:size]


def _prefix(sock: socket.socket) -> tuple[bytes, list[int]]:
    """A message's prefix, and the descriptors that came with its first bytes."""
    data, fds = b"", list[int]()
    while len(data) < _PREFIX.size:
        found, ancillary, _, _ = sock.recvmsg(_PREFIX.size - len(data), socket.CMSG_SPACE(MAX_FDS * 4))
        for level, kind, values in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.extend(array.array("i", values[:len(values) - len(values) % 4]))
        if not found:
            raise Closed("the other end closed the socket")
        data += found
    return data, fds


def _receive_into(sock: socket.socket, into: memoryview) -> None:
    while len(into):
        size = sock.recv_into(into)
        if size == 0:
            raise Closed("the other end closed the socket")
        into = into[size:]
