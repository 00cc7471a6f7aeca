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

from ...formats import SentType, place, received
from ...formats.description import ChunkKeyEncoding
from ...grid import Box, Index, piece_of
from ...store import open_below

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
class FilesJob:
    """Chunks `cells` of an array (`ChunkFiles`), into `box` of it held by a slab of `shape`
    (the box's) and `dtype`; `fill`: one element of the fill value, as the slab holds it."""

    slab: int
    shape: Index
    dtype: np.dtype[Any] | SentType  # (not `str`: it names ml_dtypes' types in another byte order as void)
    box_start: Index
    cells: list[Index]
    fill: bytes


@dataclass(frozen=True)
class FilesRead:
    """What became of each chunk of a job (READ, MISSING or REFERRED), the generation of each
    read (None otherwise), the bytes read and the CPU seconds it took."""

    states: bytes
    generations: list[str | None]
    nbytes: int
    cpu: float


class FileReader:
    """A decoding process's reads of chunk files (one per process: it keeps its buffers)."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def read(self, files: ChunkFiles, directory: int, job: FilesJob, slab: Any) -> FilesRead:
        started = time.thread_time()
        dtype = received(job.dtype)
        out = np.frombuffer(slab, dtype=dtype, count=math.prod(job.shape)).reshape(job.shape)
        box = Box(job.box_start, tuple(a + n for a, n in zip(job.box_start, job.shape, strict=True)))
        # (not `files.elements == dtype` alone: numpy takes None for float64)
        elements = dtype if files.elements is not None and received(files.elements) == dtype else None
        fill = np.frombuffer(job.fill, dtype=dtype)  # (an element: a scalar would be converted)
        states = bytearray(len(job.cells))
        generations: list[str | None] = [None] * len(job.cells)
        nbytes = 0
        for number, cell in enumerate(job.cells):
            piece = piece_of(cell, box, files.chunk_shape)
            try:
                opened = open_below(directory, files.keys.key(cell))
            except FileNotFoundError:
                out[piece.in_box] = fill
                states[number] = MISSING
                continue
            except OSError:
                states[number] = REFERRED
                continue
            try:
                data = self.whole(opened.fd, opened.size)
            finally:
                os.close(opened.fd)
            chunk = files.decoder(data) if elements is None else \
                np.frombuffer(data, elements).reshape(files.chunk_shape)  # (ValueError: not a chunk's bytes)
            place(out[piece.in_box], chunk[piece.in_cell])
            generations[number] = opened.generation
            nbytes += opened.size
        return FilesRead(bytes(states), generations, nbytes, time.thread_time() - started)

    def whole(self, fd: int, size: int) -> memoryview:
        """A file's `size` bytes (a short read: the file changed; the decoder says so)."""
        if len(self._buffer) < size:
            self._buffer = bytearray(size)
        into = memoryview(self._buffer)[:size]
        done = 0
        while done < size and (got := os.preadv(fd, [into[done:]], done)):
            done += got
        return into[:done]


def states_of(found: FilesRead, cells: Sequence[Index], state: int) -> list[Index]:
    """The cells of a job that came to `state`."""
    return [cell for cell, got in zip(cells, found.states, strict=True) if got == state]
