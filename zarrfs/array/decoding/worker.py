"""A decoding process: it takes jobs from the daemon (encoded chunks, each with the decoder of
its array and its place in a slab of shared memory; or the grid indices of chunks to read from
a local store's files itself: `files`), decodes them on its own interpreter lock and copies
their elements into the slab, where the daemon's replies read them.

It opens nothing by a path of its own choosing: its slabs come as descriptors, its chunks as
bytes, as files the daemon opened (a local store's, or a disk cache's entries, whose bytes it
checks against the CRC-32C their header gave) or as keys below a directory the store lent
(opened as the store's own opens would), its decoders as pickles of the array's own codecs. It
ends at the end of its socket (the daemon closed it, or died)."""

from __future__ import annotations

import math
import mmap
import os
import pickle
import socket
import time
from typing import Any

import numpy as np

from ...codecs import place, received
from . import encoding, wire
from .files import ChunkFileReader, FilesJob


class Worker:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.slabs: dict[int, mmap.mmap] = {}
        self.decoders: dict[bytes, Any] = {}  # (decoders, and arrays' `ChunkFiles`)
        self.inbox = wire.Inbox()
        self.files = ChunkFileReader()

    def serve(self) -> None:
        while True:
            try:
                header, payload, fds = wire.receive(self.sock, self.inbox)
            except (wire.Closed, OSError):
                return
            kind = header[0]
            if kind == "slab":
                self.slabs[header[1]] = _mapped(fds[0], header[2])
            elif kind == "forget":
                found = self.slabs.pop(header[1], None)
                if found is not None:
                    found.close()
            elif kind == "decoder":
                self.decoders[header[1]] = pickle.loads(payload)
            elif kind in ("decode", "files"):
                try:
                    answer = self._decode(header[1], header[2], payload, fds) if kind == "decode" \
                        else self._read_files(header[1], header[2], header[3], fds[0])
                finally:
                    for fd in fds:
                        os.close(fd)
                wire.send(self.sock, answer)
            elif kind == "encode":  # (its encoder sent as a "decoder": a callable by its key)
                wire.send(self.sock, encoding.encode(header[1], header[2], self.decoders, self.slabs))

    def _decode(self, job: int, items: list[tuple[Any, ...]], payload: memoryview,
                files: list[int]) -> tuple[Any, ...]:
        """Each item's chunk (in `payload`, or read from the next of `files`) decoded into
        its slab: ("done", job, CPU seconds), or ("failed", job, the item, what failed)."""
        started, at, next_file = time.thread_time(), 0, iter(files)
        for number, (decoder, slab, shape, dtype, in_box, in_cell, length, file) in enumerate(items):
            try:
                data = payload[at:at + length] if file is None else self.files.whole(next(next_file), *file)
                chunk = self.decoders[decoder](data)
                out = np.frombuffer(self.slabs[slab], dtype=received(dtype), count=math.prod(shape))
                place(out.reshape(shape)[in_box], chunk[in_cell])
            except Exception as e:  # (a corrupt chunk, or a bug: the daemon decodes it again itself)
                return ("failed", job, number, f"{type(e).__name__}: {e}")
            at += length
        return ("done", job, time.thread_time() - started)

    def _read_files(self, job: int, files: bytes, read: FilesJob, directory: int) -> tuple[Any, ...]:
        """A files job: ("done", job, FilesRead), or ("failed", job, -1, what failed)."""
        try:
            found = self.files.read(self.decoders[files], directory, read, self.slabs[read.slab])
            return ("done", job, found)
        except Exception as e:  # (a corrupt chunk, or a bug: the daemon reads them again itself)
            return ("failed", job, -1, f"{type(e).__name__}: {e}")


def _mapped(fd: int, nbytes: int) -> mmap.mmap:
    """A slab's shared memory mapped here, every page at once (the descriptor closed): page by
    page as each is first written, two processes faulting in every page of every slab cost a
    cold read of lz4 chunks 0.06 s of 0.6 s of CPU (a fresh 16 MiB slab: 7.5 ms faulted, 6.8
    populated; one already made: 4.5 and 1.8)."""
    try:
        return mmap.mmap(fd, nbytes, flags=mmap.MAP_SHARED | mmap.MAP_POPULATE)
    finally:
        os.close(fd)


def serve(sock: socket.socket) -> None:
    Worker(sock).serve()
