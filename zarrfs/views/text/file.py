"""`data.txt`: an array of strings or bytes as text, one element per line in C order, so
`wc -l` counts its elements and `grep`, `sort` and `awk` read it. Strings are UTF-8 with a
backslash, newline and carriage return written `\\\\`, `\\n` and `\\r`; bytes are lowercase hex.
Read only.

The file is served a slab at a time: the elements of one row of chunks along the first axis
(a chunk, for one dimension), contiguous in C order. Its size needs every slab's length in
bytes, so the first `stat` or read decodes every chunk once and keeps an index of the slabs'
offsets (one integer per row of chunks); after that a read decodes only the slabs its range
covers. Rendered slabs are kept up to `RENDERED`'s budget (the most recently used, of all files).
"""

from __future__ import annotations

import bisect
import itertools
import threading

import numpy as np

from ...array import HeldBytes, VariableArray
from ...grid import Box
from ..files import ReadOnlyFile
from ..xattrs import variable_attributes

TEXT_NAME = "data.txt"
RENDERED = HeldBytes(32 << 20)


def render(values: np.ndarray, kind: str) -> bytes:
    """Elements as lines: escaped UTF-8 text, or hex for bytes."""
    flat = values.reshape(-1)
    if kind == "bytes":
        lines = [bytes(v or b"").hex() for v in flat]
    else:
        lines = [str(v or "").replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r") for v in flat]
    return b"".join(line.encode() + b"\n" for line in lines)


class TextFile(ReadOnlyFile):
    direct_io = False  # (read-only, and the same until the array is opened again)

    def __init__(self, array: VariableArray) -> None:
        self.array = array
        grid = array.grid
        shape = grid.shape
        if not shape:
            self._rows = [0, 1]  # (rank 0: one slab of one element)
        else:
            origin = (0,) * (len(shape) - 1)
            starts = [grid.chunk_box((i, *origin)).start[0] for i in range(grid.grid_shape[0])]
            self._rows = [*starts, shape[0]] if starts else [0]
        self._lock = threading.Lock()
        self._ends: list[int] | None = None  # where each slab ends in the file
        self._slabs = object()  # (this file's key in RENDERED)

    def xattrs(self) -> dict[str, bytes]:
        return variable_attributes(self.array.description)

    @property
    def size(self) -> int:
        ends = self._index()
        return ends[-1] if ends else 0

    def _index(self) -> list[int]:
        with self._lock:
            if self._ends is not None:
                return self._ends
        lengths = (len(self._slab(i)) for i in range(len(self._rows) - 1))
        ends = list(itertools.accumulate(lengths))
        with self._lock:
            self._ends = ends
        return ends

    def _slab(self, i: int) -> bytes:
        found = RENDERED.get((self._slabs, i))
        if found is not None:
            return bytes(found)
        shape = self.array.shape
        box = Box((), ())
        if shape:
            box = Box((self._rows[i], *(0,) * (len(shape) - 1)), (self._rows[i + 1], *shape[1:]))
        text = render(self.array.read(box), self.array.description.kind)
        RENDERED.put((self._slabs, i), text)
        return text

    def read(self, offset: int, size: int) -> bytes:
        ends = self._index()
        end = min(offset + size, ends[-1] if ends else 0)
        pieces = []
        i = bisect.bisect_right(ends, offset)
        while offset < end:
            start = ends[i - 1] if i else 0
            text = self._slab(i)
            pieces.append(text[offset - start : end - start])
            offset = start + len(text)
            i += 1
        return b"".join(pieces)
