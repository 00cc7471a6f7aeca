"""Arrays of variable-length strings (v2 `vlen-utf8`, v3 `string`) as datasets of `data.h5`:
HDF5 variable-length UTF-8 strings, NetCDF-4's NC_STRING, which netCDF-C, h5py, h5netcdf and
xarray read as str. (Variable-length bytes are left out: HDF5's sequences of bytes are no
netCDF type ncdump shows, and h5netcdf fails on them.)

The dataset is chunked as the array: its index and a slot per chunk of 16-byte elements
(`vlen`) at offsets known from the shape, as a dataset of numbers; the strings are in
global heap collections after every fixed part of the file, chunk after chunk (`Tails`).
Their sizes depend on the strings, so the first `stat` or read of the file decodes every
chunk once and keeps the end of each chunk's collections (one integer per chunk), as
`data.txt` does; after that a read decodes only the chunks its range covers. Decoded chunks'
collections are kept by recency within `HEAPS`' budget (of all files).

numpy's `U` strings have a width (UTF-32, `n` characters): each string's object is its UTF-8
bytes exactly, followed by an object no element refers to that fills it out to 4n bytes
(`hdf5_vlen.collections`' `room`). Every chunk's collections then have one size, known from
the shape: `ls -l` of the array's directory reads no chunk.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ...array import HeldBytes
from ...formats.description import ArrayDescription
from ...grid import Box, Index, cell_count
from ..files import FileForm
from ..placement import Placement
from . import structures as h5
from .array_file import dataset_file, h5_dataset, shows_array_h5
from .attributes import attribute_messages
from .chars import chars_h5_file, shows_chars_h5
from .dataset_chunks import ChunkedFile, DatasetChunks, ScalarSlot, Tails
from .vlen import ELEMENT, STRING_TYPE, collections, collections_size, placed

HEAPS = HeldBytes(32 << 20)
MAX_CHUNKS = 1 << 20  # (past this many chunks no data.h5: its first stat would decode them all)
# In a group's data.h5, which `ls -l` of the group stats: past this many chunks an array of
# strings is left out (its own directory's file shows it), or that `ls -l` would read them all.
GROUP_CHUNKS = 64
_DEFAULT_FILL = bytes([3, 0x03 | (2 << 2)])  # (fill value message: none defined, an empty string)


class StringSource:
    """An array of strings as a dataset reads it: by chunks of `read_chunk_shape`, as UTF-8."""

    def __init__(self, array: Any, metadata: ArrayDescription, chunk: Index,
                 width: int | None = None) -> None:
        """`width`: the most bytes a string may take (None: unbounded), the room each is given."""
        self.array = array
        self.metadata = metadata
        self.shape: Index = tuple(metadata.shape)
        self.read_chunk_shape: Index = tuple(chunk)
        self.width = width

    @property
    def changes(self) -> Any:
        """What changes when the array is written (read only: nothing)."""
        return 0

    def read(self, box: Box) -> np.ndarray:
        """The elements of `box` (inside the array)."""
        raise NotImplementedError

    def fill(self) -> str:
        """The array's fill value."""
        raise NotImplementedError

    @property
    def chunk_count(self) -> int:
        return cell_count(self.shape, self.read_chunk_shape)

    def fill_text(self) -> str | None:
        """`_FillValue` as xarray reads it from the store: the attribute, else a v2 array's
        stated fill value (with xarray's `_ARRAY_DIMENSIONS`); else None (none: v3's)."""
        attributes = self.metadata.attributes
        if "_FillValue" in attributes:
            found = attributes["_FillValue"]
            return found if isinstance(found, str) else None
        stated = "_ARRAY_DIMENSIONS" in attributes and self.metadata.fill_value_stated
        return self.fill() if stated else None

    def chunk_values(self, unit: Index) -> list[bytes]:
        """Chunk `unit`'s strings as UTF-8, C order, the chunk whole (past the array's edge:
        empty)."""
        start = tuple(u * c for u, c in zip(unit, self.read_chunk_shape, strict=True))
        stop = tuple(min(s + c, n) for s, c, n in zip(start, self.read_chunk_shape, self.shape, strict=True))
        inside = Box(start, stop)
        whole = np.full(self.read_chunk_shape, "", dtype=object)
        whole[tuple(slice(0, n) for n in inside.shape)] = self.read(inside)
        return [_utf8(str(v or "")) for v in whole.reshape(-1)]


class VariableStrings(StringSource):
    """An array of strings of no fixed size (`zarrfs.array.variable.VariableArray`, read only)."""

    def __init__(self, array: Any) -> None:
        super().__init__(array, array.description.grid, array.description.grid.chunk_shape)

    def read(self, box: Box) -> np.ndarray:
        return np.asarray(self.array.read(box))

    def fill(self) -> str:
        return str(self.array.description.fill)


class UnicodeStrings(StringSource):
    """An array of numpy's fixed-size `U` strings (UTF-32: no HDF5 or netCDF type), its
    strings as variable-length UTF-8, which xarray reads back as the same str."""

    def __init__(self, array: Any) -> None:
        super().__init__(array, array.metadata, array.read_chunk_shape,
                         width=array.data_type.storage.itemsize)  # (4 bytes a character)

    @property
    def changes(self) -> Any:
        return self.array.changes

    def read(self, box: Box) -> np.ndarray:
        return np.asarray(self.array.read_boxes([box])[0])

    def fill(self) -> str:
        return str(np.frombuffer(self.metadata.fill_value, self.array.data_type.storage)[0])


def _shows(grid: ArrayDescription, chunk: Index) -> bool:
    """No empty dimension, a regular grid of at most MAX_CHUNKS chunks (a scalar: one)."""
    if 0 in grid.shape or not grid.is_regular:
        return False
    return cell_count(grid.shape, chunk) <= MAX_CHUNKS


def shows_strings_h5(array: Any) -> bool:
    """An array of strings of no fixed size (not bytes) a dataset holds."""
    grid: ArrayDescription = array.description.grid
    return bool(array.description.kind == "string" and _shows(grid, grid.chunk_shape))


def shows_unicode_h5(array: Any) -> bool:
    """An array of numpy `U` strings (v2 `<U4`, v3 `fixed_length_utf32`) a dataset holds."""
    return bool(array.data_type.kind == "string" and _shows(array.metadata, array.read_chunk_shape))


class StringHeaps:
    """The collections of the `count` chunks of `source` (chunk `n` is `unit_of(n)`), chunk
    after chunk: one dataset's tail."""

    def __init__(self, source: StringSource, count: int, unit_of: Callable[[int], Index]) -> None:
        self.source = source
        self.count = count
        self.unit_of = unit_of
        self._ends: np.ndarray | None = None  # (where each chunk's collections end: 8 bytes a chunk)
        self._lock = threading.Lock()
        self._key = object()  # (this file's in HEAPS)

    def size(self) -> int:
        ends = self._index()
        return int(ends[-1]) if len(ends) else 0

    def offset(self, number: int) -> int:
        """Where chunk `number`'s collections start, from this tail's start."""
        return int(self._index()[number - 1]) if number else 0

    def _index(self) -> np.ndarray:
        with self._lock:
            if self._ends is not None:
                return self._ends
        width = self.source.width
        if width is None:
            sizes = np.fromiter((len(self.heap(n)) for n in range(self.count)), np.int64, self.count)
            ends = np.cumsum(sizes)
        else:  # (every chunk's the same: no chunk read)
            one = collections_size(math.prod(self.source.read_chunk_shape), width)
            ends = np.arange(1, self.count + 1, dtype=np.int64) * one
        with self._lock:
            self._ends = ends
        return ends

    def heap(self, number: int) -> bytes:
        return self._rendered(number)[0]

    def elements(self, number: int) -> np.ndarray:
        return np.frombuffer(self._rendered(number)[1], ELEMENT)

    def _rendered(self, number: int) -> tuple[bytes, bytes]:
        heap, elements = HEAPS.get((self._key, number, "heap")), HEAPS.get((self._key, number, "elements"))
        if heap is not None and elements is not None:
            return bytes(heap), bytes(elements)
        made, placed_elements = collections(self.source.chunk_values(self.unit_of(number)), self.source.width)
        HEAPS.put((self._key, number, "heap"), made)
        HEAPS.put((self._key, number, "elements"), placed_elements.tobytes())
        return made, placed_elements.tobytes()

    def piece(self, inside: int, end: int) -> bytes:
        ends = self._index()
        number = int(np.searchsorted(ends, inside, side="right"))
        start = self.offset(number)
        return self.heap(number)[inside - start:min(end, int(ends[number])) - start]

    def forget_fetched(self) -> None:
        return None  # (the sizes are the file's; a chunk is decoded again when dropped)


class StringChunks(DatasetChunks):
    """A dataset of strings' index and slots of 16-byte elements; its heaps a tail of the file."""

    def __init__(self, source: StringSource, at: int, tails: Tails) -> None:
        super().__init__(source, np.dtype("V16"), None, at)
        self.heaps = StringHeaps(source, self.index.count, self._unit)
        self._tails, self._tail = tails, tails.add(self.heaps)

    def _make_chunk(self, number: int) -> bytes:
        address = self._tails.starts()[self._tail] + self.heaps.offset(number)
        return placed(self.heaps.elements(number), address)[:self.slot]


class StringScalar(ScalarSlot):
    """A scalar's 16-byte element (contiguous: HDF5 chunks no scalar); its heap a tail."""

    def __init__(self, source: StringSource, at: int, tails: Tails) -> None:
        super().__init__(source, np.dtype("V16"), at)
        self.heaps = StringHeaps(source, 1, lambda _: ())
        self._tails, self._tail = tails, tails.add(self.heaps)

    def piece(self, offset: int, end: int) -> bytes:
        element = placed(self.heaps.elements(0), self._tails.starts()[self._tail])
        return element[offset - self.start:min(end, self.end) - self.start]


class StringDataset:
    """An array of strings as a dataset of variable-length strings."""

    def __init__(self, array: StringSource) -> None:
        self.array = array

    def chunks(self, at: int, tails: Tails) -> StringChunks | StringScalar:
        if not self.array.shape:
            return StringScalar(self.array, at, tails)
        return StringChunks(self.array, at, tails)

    def fill_heap(self) -> bytes:
        """The collection holding `_FillValue`'s string, when it has one of some bytes."""
        text = self.array.fill_text()
        return collections([_utf8(text)])[0] if text else b""

    def header(self, part_at: int, extra: Sequence[bytes], fill_at: int = 0) -> bytes:
        """Its object header, its part at `part_at`, with `extra` (its dimensions) before its
        attributes, its `fill_heap` at `fill_at`."""
        shape = tuple(self.array.shape)
        layout = (h5.chunked_layout(self.array.read_chunk_shape, ELEMENT.itemsize, part_at) if shape
                  else h5.contiguous_layout(part_at, ELEMENT.itemsize))
        messages = [h5.message(h5.DATASPACE, h5.dataspace(shape)),
                    h5.message(h5.DATATYPE, STRING_TYPE, flags=1),
                    h5.message(h5.FILL_VALUE, _DEFAULT_FILL, flags=1),
                    h5.message(h5.LAYOUT, layout)]
        attributes: Mapping[str, Any] = self.array.metadata.attributes
        text = self.array.fill_text()
        fill = [] if text is None else [_fill_attribute(text, fill_at)]
        others = attribute_messages(attributes, np.dtype("f8"), None)
        return h5.object_header([*messages, *extra, *fill, *others])


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _fill_attribute(text: str, heap_at: int) -> bytes:
    """`_FillValue`, as xarray reads a stated fill: "" an element of no string (no heap, as
    the library writes it), else object 1 of the collection at `heap_at` (`fill_heap`)."""
    value = bytes(ELEMENT.itemsize) if not text else placed(collections([_utf8(text)])[1], heap_at)
    return h5.message(h5.ATTRIBUTE, h5.attribute("_FillValue", STRING_TYPE, (1,), value))


def strings_h5_file(array: StringSource) -> ChunkedFile:
    """`data.h5` of an array of strings (one `shows_strings_h5` shows)."""
    return dataset_file(StringDataset(array))


def shows_h5(array: Any) -> bool:
    """Whether an array's directory shows data.h5: numbers, numpy `U` strings or `S` bytes."""
    return shows_array_h5(array) or shows_unicode_h5(array) or shows_chars_h5(array)


def array_h5_file(array: Any, form: FileForm, placement: Callable[[], Placement]) -> ChunkedFile:
    """`data.h5` of an array of fixed-size elements (one `shows_h5` shows)."""
    if shows_unicode_h5(array):
        return strings_h5_file(UnicodeStrings(array))
    if shows_chars_h5(array):
        return chars_h5_file(array, form)
    return dataset_file(h5_dataset(array, form))
