"""A decoding process reading a stream's chunks from a local store itself.

The daemon lends it the array's directory (`Store.lend_directory`) and names the chunks of a
slab by their grid index; the process opens each below the directory as the store's own opens
would (`open_below`: no link, nothing outside, regular files only), reads it into a buffer it
keeps and decodes it into its place in the slab (stored as its elements are, its bytes are
copied there as they are). The daemon's part of a chunk is then a few bytes of a message,
where it was an open, a status, an object and a descriptor passed (4 KiB chunks: 16,384 of
them in a 64 MiB array, each costing the daemon ~50 us of Python).

The two copies of an uncompressed chunk (the read into a buffer the cache keeps, the copy into
its rows of the slab) cost half what one scattered read into the rows costs (preadv: 65 us
against 127 us for a 512 KiB chunk of 1 KiB rows, 34 against 69 for 16 KiB rows, measured
here): the kernel copies each row in its own step, into memory not in the cache; a copy from a
mapping of the file costs as much as the two (71 us).

A chunk the process may not open so (a link, no permission: the store's own open follows
links that stay inside, and says why it refuses the others) is left to the daemon, which
reads it as it reads any other (`REFERRED`)."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...codecs import SentType, place, received
from ...formats.description import ChunkKeyEncoding
from ...grid import Box, Index, piece_of
from ...store import open_below, read_opened

READ, MISSING, REFERRED = 0, 1, 2  # what became of each chunk of a job


@dataclass(frozen=True)
class ChunkFiles:
    """How one array's chunks are read from its files: its keys, its chunks' shape, and its
    decoder, or the type of its elements where they are stored as they are (picklable: sent
    once to each process)."""

    keys: ChunkKeyEncoding
    chunk_shape: Index
    decoder: Callable[[Any], np.ndarray]
    elements: np.dtype[Any] | SentType | None  # the stored elements' type (None: the chunks are decoded)


@dataclass(frozen=True)
class ShardPart:
    """Where a job's chunks lie when they are inner chunks of one shard: its key, the generation
    its index was read at (None: no shard stored), and each chunk's (offset, nbytes) in it as
    that index says (None: not stored)."""

    key: str
    generation: str | None
    spans: list[tuple[int, int] | None]


@dataclass(frozen=True)
class FilesJob:
    """Chunks `cells` of an array (`ChunkFiles`), into `box` of it held by a slab of `shape`
    (the box's) and `dtype`; `fill`: one element of the fill value, as the slab holds it;
    `shard`: where they lie, when they are inner chunks of one shard (else each its file)."""

    slab: int
    shape: Index
    dtype: np.dtype[Any] | SentType  # (not `str`: it names ml_dtypes' types in another byte order as void)
    box_start: Index
    cells: list[Index]
    fill: bytes
    shard: ShardPart | None = None


@dataclass(frozen=True)
class FilesRead:
    """What became of each chunk of a job (READ, MISSING or REFERRED), the generation of each
    read (None otherwise), the bytes read and the CPU seconds it took."""

    states: bytes
    generations: list[str | None]
    nbytes: int
    cpu: float


class _Slab:
    """A job's chunks going into their places in the slab, and what becomes of each."""

    def __init__(self, files: ChunkFiles, job: FilesJob, slab: Any) -> None:
        dtype = received(job.dtype)
        self.out = np.frombuffer(slab, dtype=dtype, count=math.prod(job.shape)).reshape(job.shape)
        self.box = Box(job.box_start, tuple(a + n for a, n in zip(job.box_start, job.shape, strict=True)))
        self.files = files
        # (not `files.elements == dtype` alone: numpy takes None for float64)
        self.elements = dtype if files.elements is not None and received(files.elements) == dtype else None
        self.fill = np.frombuffer(job.fill, dtype=dtype)  # (an element: a scalar would be converted)
        self.states = bytearray(len(job.cells))
        self.generations: list[str | None] = [None] * len(job.cells)
        self.nbytes = 0

    def put(self, number: int, cell: Index, data: Any, generation: str) -> None:
        """Chunk `number` of the job decoded (or taken as it is) into its place."""
        files, piece = self.files, piece_of(cell, self.box, self.files.chunk_shape)
        chunk = files.decoder(data) if self.elements is None else \
            np.frombuffer(data, self.elements).reshape(files.chunk_shape)  # (ValueError: not a chunk's bytes)
        place(self.out[piece.in_box], chunk[piece.in_cell])
        self.generations[number] = generation
        self.nbytes += len(data)

    def missing(self, number: int, cell: Index, generation: str | None = None) -> None:
        """Chunk `number` is not stored (`generation`: of the shard it is not stored in)."""
        self.out[piece_of(cell, self.box, self.files.chunk_shape).in_box] = self.fill
        self.states[number] = MISSING
        self.generations[number] = generation


class ChunkFileReader:
    """A decoding process's reads of chunk files (one per process: it keeps its buffers)."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def read(self, files: ChunkFiles, directory: int, job: FilesJob, slab: Any) -> FilesRead:
        started = time.thread_time()
        target = _Slab(files, job, slab)
        if job.shard is None:
            self._chunks(files, directory, job, target)
        else:
            self._inner_chunks(directory, job, job.shard, target)
        cpu = time.thread_time() - started
        return FilesRead(bytes(target.states), target.generations, target.nbytes, cpu)

    def _chunks(self, files: ChunkFiles, directory: int, job: FilesJob, target: _Slab) -> None:
        """Each chunk its own file."""
        for number, cell in enumerate(job.cells):
            try:
                opened = open_below(directory, files.keys.key(cell))
            except FileNotFoundError:
                target.missing(number, cell)
                continue
            except OSError:
                target.states[number] = REFERRED
                continue
            try:
                data = self.whole(opened.fd, opened.size)
            finally:
                os.close(opened.fd)
            target.put(number, cell, data, opened.generation)

    def _inner_chunks(self, directory: int, job: FilesJob, shard: ShardPart, target: _Slab) -> None:
        """Inner chunks of one shard, where its index said: the bytes from the first to the
        last read at once. A shard rewritten since its index was read is the daemon's to
        read again (its index too)."""
        stored = [span for span in shard.spans if span is not None]
        first = min((offset for offset, _ in stored), default=0)
        last = max((offset + nbytes for offset, nbytes in stored), default=0)
        data = memoryview(b"")
        if stored:
            try:
                opened = open_below(directory, shard.key)
            except OSError:
                opened = None
            if opened is None or opened.generation != shard.generation:
                if opened is not None:
                    os.close(opened.fd)
                target.states[:] = bytes([REFERRED]) * len(job.cells)
                return
            try:
                data = self.whole(opened.fd, last - first, first)
            finally:
                os.close(opened.fd)
        generation = shard.generation or ""  # (a shard read has one)
        for number, (cell, span) in enumerate(zip(job.cells, shard.spans, strict=True)):
            if span is None:
                target.missing(number, cell, shard.generation)
            else:
                target.put(number, cell, data[span[0] - first:span[0] - first + span[1]], generation)

    def whole(self, fd: int, size: int, offset: int = 0, crc: int | None = None) -> memoryview:
        """`size` bytes of a file from `offset` (a short read: the file changed; the decoder
        says so), checked against `crc` where given (a disk cache's entry: its bytes or none)."""
        if len(self._buffer) < size:
            self._buffer = bytearray(size)
        found = read_opened(fd, size, offset, crc, memoryview(self._buffer))
        if found is None:
            raise ValueError("a disk cache entry failed its checksum")
        return found


def states_of(found: FilesRead, cells: Sequence[Index], state: int) -> list[Index]:
    """The cells of a job that came to `state`."""
    return [cell for cell, got in zip(cells, found.states, strict=True) if got == state]
