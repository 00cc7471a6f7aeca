"""One chunked dataset's part of a `data.h5` file past its object header: the B-tree
indexing its chunks (made as it is read: `index_nodes`), then a slot per chunk; and a file
made of metadata followed by such parts (`ChunkedFile`), which an array's file and a group's
file both are.

A chunk's slot is as long as the codec's bound, at an offset known in advance, so the layout
is computed from the array's shape and codecs alone, at no store request. The tree's nodes
above its leaves are made from the grid alone; a leaf of 64 chunks passed through as stored
costs a look at the stored sizes of its 64 chunks (the sizes in the tree are exact; a chunk
not stored points at the fill chunk), a walk of the leaves a look at the rows stored; a leaf
of chunks served decoded costs nothing (each is the chunk's size, in its own slot).
"""

from __future__ import annotations

import bisect
import itertools
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from ...array import Reading
from ...grid import Box, Index, unravel
from ..files import RANDOM_ACCESS_BLOCK, ReadOnlyFile
from . import structures as h5
from .filters import Filtered
from .index_nodes import IndexNodes, StoredRows

ALIGN = 4096  # (chunk slots start on a page: a chunk read is one request of whole pages)
_KEPT = 16  # chunks kept by one dataset (a reader reads a leaf, then its chunks)


class DatasetChunks:
    """The B-tree indexing `array`'s chunks, its root at `at`, then (filtered chunks) one slot
    holding the chunk of fill values, and the chunks' slots (from `data_at` to `end`). `array`
    is an `array_file.H5Array`.

    Every chunk has an entry: one not stored points at the fill chunk, encoded with the
    dataset's filters, so every reader decodes it to the fill value (HDF5 itself, and readers
    that take a missing chunk for zeros)."""

    def __init__(self, array: Any, dtype: np.dtype[Any], through: Filtered | None, at: int) -> None:
        form = through.form if through else None
        self.array, self.dtype, self.form = array, dtype, form
        chunk = tuple(array.read_chunk_shape)
        self.grid = tuple(-(-n // c) for n, c in zip(array.shape, chunk, strict=True))
        self.chunk_bytes = max(1, int(np.prod(chunk))) * dtype.itemsize
        self.index = h5.ChunkBTree(at, self.grid, chunk, dtype.itemsize)
        longest = form.bound(self.chunk_bytes) + through.extra if through and form else self.chunk_bytes
        self.slot = -(-longest // ALIGN) * ALIGN
        self.fill_at = -(-self.index.end // ALIGN) * ALIGN
        self.data_at = self.fill_at + (self.slot if form else 0)
        self.end = self.data_at + self.slot * self.index.count
        self.nodes = IndexNodes(self.index, self._entries)
        self._rows = StoredRows(lambda: self.array.stored_rows())  # (asked only of stored chunks)
        self._kept: OrderedDict[int, bytes] = OrderedDict()
        self._fill_chunk: bytes | None = None
        self._lock = threading.Lock()

    @property
    def start(self) -> int:
        return self.index.at

    def piece(self, offset: int, end: int) -> bytes:
        """The bytes from `offset` (at or past the index's root) to the end of the structure
        there, or to `end`."""
        found = self._piece(offset, end, wait=True)
        assert found is not None
        return found

    def ready(self, offset: int, end: int) -> bytes | None:
        """As `piece`, when its bytes are made (no wait), else None."""
        return self._piece(offset, end, wait=False)

    def _piece(self, offset: int, end: int, *, wait: bool) -> bytes | None:
        index = self.index
        end = min(end, self.end)
        if offset >= self.fill_at:
            number, inside = divmod(offset - self.fill_at, self.slot)
            wanted = min(end - offset, self.slot - inside)
            found = self._slot(number, wait)
            if found is None:
                return None
            found = found[inside:inside + wanted]
            return found + bytes(wanted - len(found))  # (the slot's rest: zeros)
        if offset < index.end:
            level, number = index.node_containing(offset)
            start = index.node_at(level, number)
            node = self.nodes.node(level, number) if wait else self.nodes.node_now(level, number)
            return None if node is None else node[offset - start:min(end, start + index.node_size) - start]
        return bytes(min(end, self.fill_at) - offset)

    def _slot(self, number: int, wait: bool) -> bytes | None:
        """The bytes of slot `number`: the fill chunk's (filtered chunks), or a chunk's."""
        if self.form and number == 0:
            return self._fill() if wait else self._fill_chunk
        number -= bool(self.form)
        if wait:
            return self._chunk(number)
        with self._lock:
            return self._kept.get(number)

    def _unit(self, number: int) -> Index:
        return unravel(number, self.grid)

    def _entries(self, numbers: np.ndarray, wide: bool) -> tuple[np.ndarray, np.ndarray]:
        """The sizes and addresses of chunks `numbers` in the index: decoded chunks in their
        slots; stored chunks as stored, a chunk not stored at the fill chunk (`wide`: many
        leaves at once, asking the store only about the rows it holds)."""
        addresses = self.data_at + numbers * self.slot
        if self.form is None:
            return np.full(len(numbers), self.chunk_bytes, dtype=np.int64), addresses
        found = self.array.stored_sizes_numbered(numbers, self._rows.rows() if wide else None)
        sizes = np.zeros(len(numbers), dtype=np.int64)
        if len(found) < len(numbers):  # (the fill chunk is encoded only when one is missing)
            sizes[:], addresses[:] = len(self._fill()), self.fill_at
        first = int(numbers[0]) if len(numbers) else 0
        for number, size in found.items():
            sizes[number - first] = size - self.form.trailer
            addresses[number - first] = self.data_at + number * self.slot
        return sizes, addresses

    def _fill(self) -> bytes:
        """The chunk of fill values as the filters decode it (its trailer off, as a chunk's):
        made once, kept apart from the chunks and nodes (it depends on no stored byte, and a
        leaf with a missing chunk needs its size after any number of chunk reads)."""
        with self._lock:
            if self._fill_chunk is not None:
                return self._fill_chunk
        assert self.form is not None
        encoded = bytes(self.array.encoded_fill())
        made = encoded[:len(encoded) - self.form.trailer]
        with self._lock:
            self._fill_chunk = made
        return made

    def _chunk(self, number: int) -> bytes:
        with self._lock:
            found = self._kept.get(number)
            if found is not None:
                self._kept.move_to_end(number)
                return found
        made = self._make_chunk(number)
        with self._lock:
            self._kept[number] = made
            while len(self._kept) > _KEPT:
                self._kept.popitem(last=False)
        return made

    def _make_chunk(self, number: int) -> bytes:
        """Chunk `number` as the index says it is: stored bytes, or decoded and whole (a chunk
        not stored, filtered: nothing, the index points at the fill chunk instead)."""
        unit = self._unit(number)
        if self.form is not None:
            stored = self.array.read_stored_unit(unit)
            found = b"" if stored is None else bytes(stored)[:len(stored) - self.form.trailer]
            return found[:self.slot]
        chunk = tuple(self.array.read_chunk_shape)
        start = tuple(u * c for u, c in zip(unit, chunk, strict=True))
        stop = tuple(min(s + c, n) for s, c, n in zip(start, chunk, self.array.shape, strict=True))
        if all(b - a == c for a, b, c in zip(start, stop, chunk, strict=True)):  # (no edge: all of it)
            decoded: np.ndarray = self.array.read_unit(unit)
            return decoded.astype(self.dtype, copy=False).tobytes()
        values = self.array.read_boxes([Box(start, stop)])[0]
        whole = np.zeros(chunk, self.dtype)
        whole[tuple(slice(0, b - a) for a, b in zip(start, stop, strict=True))] = values
        return whole.tobytes()

    def forget_fetched(self) -> None:
        with self._lock:
            self._kept.clear()
        self.nodes.forget()
        self._rows.forget()


class ScalarSlot:
    """A scalar dataset's part: its one element at `start` (the layout is contiguous: HDF5
    chunks no scalar), read from the array, decoded, each time it is read, so a write through
    `data` shows at once and the layout costs no store request."""

    def __init__(self, array: Any, dtype: np.dtype[Any], at: int) -> None:
        self.array, self.dtype = array, dtype
        self.start, self.end = at, at + dtype.itemsize

    def piece(self, offset: int, end: int) -> bytes:
        element = np.asarray(self.array.read_boxes([Box((), ())])[0]).astype(self.dtype).tobytes()
        return element[offset - self.start:min(end, self.end) - self.start]

    def ready(self, offset: int, end: int) -> bytes | None:
        return None  # (read from the array each time)

    def forget_fetched(self) -> None:
        return None


DatasetPart = DatasetChunks | ScalarSlot


class Tail(Protocol):
    """A part of the file whose size is known only by reading (the heaps of strings)."""

    def size(self) -> int: ...
    def piece(self, inside: int, end: int) -> bytes:
        """Its bytes from `inside` (from its own start) to `end` or its end."""
    def forget_fetched(self) -> None: ...


class Tails:
    """The parts after every fixed one, one after another from `start` (the file places
    them): their sizes are learnt by reading them all, at the first stat or read that needs
    an address among them, and kept for the file's life, one integer per part."""

    def __init__(self) -> None:
        self.start = 0
        self.parts: list[Tail] = []
        self._starts: list[int] | None = None
        self._lock = threading.Lock()

    def add(self, tail: Tail) -> int:
        """`tail` placed after the others: its number."""
        self.parts.append(tail)
        return len(self.parts) - 1

    def starts(self) -> list[int]:
        """Where each part starts, and the end of the last."""
        with self._lock:
            if self._starts is not None:
                return self._starts
        starts = list(itertools.accumulate((part.size() for part in self.parts), initial=self.start))
        with self._lock:
            self._starts = starts
        return starts

    def piece(self, offset: int, end: int) -> bytes:
        starts = self.starts()
        number = bisect.bisect_right(starts, offset) - 1
        if number >= len(self.parts):
            return b""
        start = starts[number]
        return self.parts[number].piece(offset - start, min(end, starts[number + 1]) - start)


class ChunkedFile(ReadOnlyFile):
    """`head` (the superblock and every object header, the superblock's end of file filled
    in here), then each dataset's index and chunks, in the order of their addresses, then
    the `tails`, if any.

    Served without the page cache: a reader of one chunk gets that chunk, not the kernel's
    readahead of the chunks after it. What is made (the metadata, the index's nodes, chunks
    kept) is answered at once, on the request loop (`readahead`)."""

    direct_io = True
    block_size = RANDOM_ACCESS_BLOCK

    def __init__(self, head: bytes, datasets: Sequence[DatasetPart], tails: Tails | None = None) -> None:
        self.datasets = sorted(datasets, key=lambda d: d.start)
        fixed = self.datasets[-1].end if self.datasets else len(head)
        self.tails = tails or Tails()
        self.tails.start = -(-fixed // 8) * 8 if self.tails.parts else fixed
        self._starts = [d.start for d in self.datasets]
        self._unplaced_head = head
        self._head: bytes | None = None if self.tails.parts else self._placed_head(fixed)

    @property
    def size(self) -> int:
        return self.tails.starts()[-1] if self.tails.parts else self.tails.start

    def _placed_head(self, size: int) -> bytes:
        return h5.file_head(size) + self._unplaced_head[h5.FILE_HEAD_SIZE:]

    def readahead(self) -> Reading:
        """A walk of the index of 10^6 chunks is 15,625 reads of leaves, made 64 at a time:
        each but the first of 64 is answered at once, not after a trip to a worker thread."""
        return MadeFirst(self)

    def read(self, offset: int, size: int) -> bytes:
        found = self._read(offset, size, wait=True)
        assert found is not None
        return found

    def ready(self, offset: int, size: int) -> bytes | None:
        """As `read`, when every byte is made (no wait), else None."""
        return self._read(offset, size, wait=False) if self._head is not None else None

    def _read(self, offset: int, size: int, *, wait: bool) -> bytes | None:
        end = min(offset + size, self.size)
        out: list[bytes] = []
        while offset < end:
            piece = self._piece(offset, end, wait)
            if piece is None:
                return None
            out.append(piece)
            offset += len(piece)
        return b"".join(out)

    def _piece(self, offset: int, end: int, wait: bool) -> bytes | None:
        if offset < len(self._unplaced_head):
            if self._head is None:
                self._head = self._placed_head(self.size)
            return self._head[offset:end]
        if offset >= self.tails.start:
            return self.tails.piece(offset, end) if wait else None
        number = bisect.bisect_right(self._starts, offset) - 1
        if number < 0:  # (between the head and the first index)
            return bytes(min(end, self._starts[0]) - offset)
        dataset, stop = self.datasets[number], min(end, self.tails.start)
        piece = dataset.piece(offset, stop) if wait else dataset.ready(offset, stop)
        return bytes(stop - offset) if piece == b"" else piece  # (the fixed parts' padding)

    def forget_fetched(self) -> None:
        """Learn the sizes and fetch the chunks again as they are next read (the tails' sizes
        are kept: the file's size stays)."""
        for dataset in self.datasets:
            dataset.forget_fetched()
        for tail in self.tails.parts:
            tail.forget_fetched()


class MadeFirst:
    """How an open `ChunkedFile` is read: what is made at once, the rest in a worker."""

    def __init__(self, file: ChunkedFile) -> None:
        self.file = file

    def ready(self, offset: int, size: int) -> bytes | None:
        return self.file.ready(offset, size)

    def read(self, offset: int, size: int) -> bytes:
        return self.file.read(offset, size)

    def close(self) -> None:
        return None
