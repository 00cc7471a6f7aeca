"""A decoding process: it takes jobs from the daemon (encoded chunks, each with the decoder of
its array and its place in a slab of shared memory), decodes them on its own interpreter lock
and copies their elements into the slab, where the daemon's replies read them.

It opens nothing: its slabs come as descriptors, its chunks as bytes or as files the daemon
opened (a local store's, or a disk cache's entries, whose bytes it checks against the CRC-32C
their header gave), its decoders as pickles of the array's own codecs. It ends at the end of
its socket (the daemon closed it, or died)."""

from __future__ import annotations

import math
import mmap
import os
import pickle
import socket
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ...store import read_opened
from . import wire

Decoder = Callable[[Any], np.ndarray]


class Worker:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.slabs: dict[int, mmap.mmap] = {}
        self.decoders: dict[bytes, Decoder] = {}
        self.inbox = wire.Inbox()
        self.file_inbox = wire.Inbox()

    def serve(self) -> None:
        while True:
            try:
                header, payload, fds = wire.receive(self.sock, self.inbox)
            except (wire.Closed, OSError):
                return
            kind = header[0]
            if kind == "slab":
                self.slabs[header[1]] = mmap.mmap(fds[0], header[2])
                os.close(fds[0])
            elif kind == "forget":
                found = self.slabs.pop(header[1], None)
                if found is not None:
                    found.close()
            elif kind == "decoder":
                self.decoders[header[1]] = pickle.loads(payload)
            elif kind == "decode":
                try:
                    answer = self._decode(header[1], header[2], payload, fds)
                finally:
                    for fd in fds:
                        os.close(fd)
                wire.send(self.sock, answer)

    def _decode(self, job: int, items: list[tuple[Any, ...]], payload: memoryview,
                files: list[int]) -> tuple[Any, ...]:
        """Each item's chunk (in `payload`, or read from the next of `files`) decoded into
        its slab: ("done", job, CPU seconds), or ("failed", job, the item, what failed)."""
        started, at, next_file = time.thread_time(), 0, iter(files)
        for number, (decoder, slab, shape, dtype, in_box, in_cell, length, file) in enumerate(items):
            try:
                data = payload[at:at + length] if file is None else self._read(next(next_file), *file)
                chunk = self.decoders[decoder](data)
                out = np.frombuffer(self.slabs[slab], dtype=np.dtype(dtype), count=math.prod(shape))
                out.reshape(shape)[in_box] = chunk[in_cell]
            except Exception as e:  # (a corrupt chunk, or a bug: the daemon decodes it again itself)
                return ("failed", job, number, f"{type(e).__name__}: {e}")
            at += length
        return ("done", job, time.thread_time() - started)

    def _read(self, fd: int, size: int, offset: int, crc: int | None) -> memoryview:
        """A file's `size` bytes at `offset` (a short read: the file changed; the decoder says
        so), checked against `crc` where given (a disk cache's entry: its bytes or none)."""
        found = read_opened(fd, size, offset, crc, self.file_inbox.room(size))
        if found is None:
            raise ValueError("a disk cache entry failed its checksum")
        return found


def serve(sock: socket.socket) -> None:
    Worker(sock).serve()
