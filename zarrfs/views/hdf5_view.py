"""`data.h5`: an array as one chunked HDF5 dataset (NetCDF-4's data model), read-only.

The dataset's chunks are the array's read chunks (a shard's inner chunks). Where they are
stored as HDF5's filters decode them (`hdf5_codecs`: `bytes`, a byte shuffle, zstd, zlib,
blosc or bzip2, fletcher32), a chunk in the file is the stored bytes as they are, in the
stored byte order:
`H5Dread_chunk` returns the stored chunk. Other chunks go out decoded, unfiltered, in the
mount's byte order.

The layout is computed from the array's shape and codecs alone, at no store request: the
metadata first, then the fixed array indexing the chunks, then a slot per chunk, as long as
the codec's bound, at an offset known in advance. The index is made as it is read: a page of
64 elements costs a look at the stored sizes of its 64 chunks (the sizes in the index
are exact; a chunk not stored has no address and reads as the fill value), never a listing
of the array.
"""

from __future__ import annotations

import itertools
import math
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from ..codecs.pipeline import Pipeline
from ..codecs.stored_form import StoredForm
from ..formats.description import ArrayDescription
from ..grid import Box, Index
from . import hdf5_format as h5
from .files import RANDOM_ACCESS_BLOCK, ReadOnlyFile
from .hdf5_attrs import attribute_messages
from .hdf5_codecs import Filtered, Filters, filtered
from .hdf5_dims import GLOBAL_HEAP_SIZE, dimension_list, global_heap, scale_header
from .netcdf import valid_name
from .placement import Placement, fill_number
from .tiff_view import TiffArray

H5_NAME = "data.h5"
DATASET = "data"  # (the dataset's name in an array's file, as the flat file beside it)
_ALIGN = 4096  # (chunk slots start on a page: a chunk read is one request of whole pages)
# Past this many chunks data.h5 is left out: the index's data block opens with a bit per page
# of 64 chunks, made and checksummed when the file is (128 KiB here; 2 MB for 10^9 chunks).
MAX_CHUNKS = 1 << 26
_KEPT = 16  # index runs and chunks kept by one file (a reader reads a run, then its chunks)


class H5Array(TiffArray, Protocol):
    """What the view needs of an array beyond `data.tif`'s: its chunk of fill values."""

    @property
    def fill_chunk(self) -> np.ndarray: ...
    @property
    def metadata(self) -> ArrayDescription: ...
    @property
    def pipeline(self) -> Pipeline: ...
    @property
    def sharding(self) -> Any: ...  # (a ShardingCodec, or None: its `inner` pipeline)


def file_dtype(array: TiffArray, form: StoredForm | None, byteorder: str) -> np.dtype[Any] | None:
    """The dataset's element type, or None when HDF5 here has none for the array's."""
    storage = array.data_type.storage
    if array.data_type.kind not in ("int", "float"):  # (bool, times: netCDF types of their own)
        return None
    if array.data_type.sub_byte_bits is not None or array.data_type.int_range is not None:
        info = np.iinfo(storage) if storage.kind in "iu" else None
        if info is None or array.data_type.int_range != (int(info.min), int(info.max)):
            return None
    order = form.byteorder if form is not None and form.byteorder else byteorder
    dtype = storage.newbyteorder("<" if order == "little" else ">")
    return dtype if h5.datatype(dtype) is not None else None


def shows_array_h5(array: TiffArray) -> bool:
    """Rank 1 and more (HDF5 chunks no scalar), no empty dimension, a type HDF5 holds, at most
    MAX_CHUNKS chunks."""
    if not (array.regular_read_chunks and len(array.shape) > 0 and 0 not in array.shape):
        return False
    chunks = math.prod(-(-n // c) for n, c in zip(array.shape, array.read_chunk_shape, strict=True))
    return chunks <= MAX_CHUNKS and file_dtype(array, None, "little") is not None


def passed_through(array: H5Array) -> Filtered | None:
    """The filters that decode the array's read chunks as stored, or None (decoded here)."""
    if not array.metadata.is_regular:
        return None  # (the shards of a rectilinear grid: each has an index of its own shape)
    pipeline = array.sharding.inner if array.sharding else array.pipeline
    return filtered(pipeline, array.data_type.itemsize)


def h5_file(array: H5Array, byteorder: str, placement: Callable[[], Placement]) -> Hdf5File:
    through = passed_through(array)
    dtype = file_dtype(array, through.form if through else None, byteorder)
    assert dtype is not None
    if through and array.dirty_bytes:
        array.flush()  # (the file shows what is stored)
    return Hdf5File(array, dtype, through)


class Hdf5File(ReadOnlyFile):
    """The metadata, the index's runs of elements (made as read), then a slot per chunk.

    Served without the page cache: a reader of one chunk gets that chunk, not the kernel's
    readahead of the chunks after it."""

    direct_io = True
    block_size = RANDOM_ACCESS_BLOCK

    def __init__(self, array: H5Array, dtype: np.dtype[Any], through: Filtered | None) -> None:
        form = through.form if through else None
        self.array, self.dtype, self.form = array, dtype, form
        chunk = tuple(array.read_chunk_shape)
        self.grid = tuple(-(-n // c) for n, c in zip(array.shape, chunk, strict=True))
        self.chunk_bytes = max(1, int(np.prod(chunk))) * dtype.itemsize
        count = int(np.prod(self.grid))
        size_length = h5.chunk_size_length(self.chunk_bytes) if form else None
        fill = np.asarray(array.fill_chunk).reshape(-1)[:1].astype(dtype).tobytes()
        self.head, self.index = _metadata(array, chunk, dtype, fill, through.filters if through else [],
                                          count, size_length)
        longest = form.bound(self.chunk_bytes) + through.extra if through and form else self.chunk_bytes
        self.slot = -(-longest // _ALIGN) * _ALIGN
        self.data_at = -(-self.index.end // _ALIGN) * _ALIGN
        self.count = count
        self.size = self.data_at + self.slot * count
        self._head = h5.superblock(self.size, h5.SUPERBLOCK_SIZE) + self.head[h5.SUPERBLOCK_SIZE:]
        self._kept: OrderedDict[tuple[str, int], bytes] = OrderedDict()
        self._lock = threading.Lock()

    # -- reading ---------------------------------------------------------------------------------

    def read(self, offset: int, size: int) -> bytes:
        end = min(offset + size, self.size)
        out: list[bytes] = []
        while offset < end:
            piece = self._piece(offset, end)
            out.append(piece)
            offset += len(piece)
        return b"".join(out)

    def _piece(self, offset: int, end: int) -> bytes:
        """The bytes from `offset` to the end of the structure there (or `end`)."""
        index = self.index
        if offset < len(self._head):
            return self._head[offset:end]
        if offset >= self.data_at:
            number, inside = divmod(offset - self.data_at, self.slot)
            wanted = min(end - offset, self.slot - inside)
            found = self._chunk(number)[inside:inside + wanted]
            return found + bytes(wanted - len(found))  # (the slot's rest: zeros)
        if index.runs_at <= offset < index.end:
            run = index.run_containing(offset)
            start = index.page_at(run)
            stop = start + index.page_run_size(run)
            return self._run(run)[offset - start:min(end, stop) - start]
        stop = min(end, self.data_at if offset >= index.end else index.runs_at)
        return bytes(stop - offset)

    def _kept_or(self, key: tuple[str, int], make: Callable[[], bytes]) -> bytes:
        with self._lock:
            found = self._kept.get(key)
            if found is not None:
                self._kept.move_to_end(key)
                return found
        made = make()
        with self._lock:
            self._kept[key] = made
            while len(self._kept) > _KEPT:
                self._kept.popitem(last=False)
        return made

    def _unit(self, number: int) -> Index:
        return tuple(int(i) for i in np.unravel_index(number, self.grid))

    def _run(self, run: int) -> bytes:
        return self._kept_or(("run", run), lambda: self._make_run(run))

    def _make_run(self, run: int) -> bytes:
        first, count = self.index.page_span(run)
        numbers = range(first, first + count)
        if self.form is None:
            return self.index.page_bytes(run, [(self.data_at + n * self.slot, 0) for n in numbers])
        units = [self._unit(n) for n in numbers]
        sizes = self.array.stored_sizes(units)
        trailer = self.form.trailer
        elements = [(self.data_at + n * self.slot, sizes[u] - trailer) if u in sizes else (h5.UNDEFINED, 0)
                     for n, u in zip(numbers, units, strict=True)]
        return self.index.page_bytes(run, elements)

    def _chunk(self, number: int) -> bytes:
        return self._kept_or(("chunk", number), lambda: self._make_chunk(number))

    def _make_chunk(self, number: int) -> bytes:
        """Chunk `number` as the index says it is: stored bytes, or decoded and whole."""
        unit = self._unit(number)
        if self.form is not None:
            stored = self.array.read_stored_unit(unit)
            found = b"" if stored is None else bytes(stored)[:len(stored) - self.form.trailer]
            return found[:self.slot]
        chunk = tuple(self.array.read_chunk_shape)
        start = tuple(u * c for u, c in zip(unit, chunk, strict=True))
        stop = tuple(min(s + c, n) for s, c, n in zip(start, chunk, self.array.shape, strict=True))
        values = self.array.read_boxes([Box(start, stop)])[0]
        whole = np.zeros(chunk, self.dtype)
        whole[tuple(slice(0, b - a) for a, b in zip(start, stop, strict=True))] = values
        return whole.tobytes()

    def forget_fetched(self) -> None:
        """Learn the sizes and fetch the chunks again as they are next read."""
        with self._lock:
            self._kept.clear()


def dimension_names(array: H5Array) -> tuple[str, ...] | None:
    """The dimensions' names (v3 `dimension_names`, xarray's v2 `_ARRAY_DIMENSIONS`) when every
    one is a distinct netCDF name, not the dataset's own; else None (netCDF's phony ones)."""
    metadata = array.metadata
    names = metadata.dimension_names or metadata.attributes.get("_ARRAY_DIMENSIONS")
    if not isinstance(names, list | tuple) or len(names) != len(array.shape):
        return None
    if not all(isinstance(n, str) and valid_name(n) and n != DATASET for n in names):
        return None
    found = tuple(str(n) for n in names)
    return found if len(set(found)) == len(found) else None


def _fill_attribute(array: H5Array, dtype: np.dtype[Any], fill: bytes) -> bytes | None:
    """`_FillValue` as xarray reads it: the attribute, else the fill value of an array with
    named dimensions (v3 `dimension_names`, v2 `_ARRAY_DIMENSIONS`: xarray's), else none."""
    attributes = array.metadata.attributes
    if "_FillValue" in attributes:
        value = attributes["_FillValue"]
        number = value if isinstance(value, int) and not isinstance(value, bool) else fill_number(value)
        if number is None:
            return None
        with np.errstate(all="ignore"):
            return np.asarray(number).astype(dtype).reshape(-1)[:1].tobytes()
    named = array.metadata.dimension_names is not None or "_ARRAY_DIMENSIONS" in attributes
    return fill if named else None


def _metadata(array: H5Array, chunk: Index, dtype: np.dtype[Any], fill: bytes, filters: Filters,
              count: int, size_length: int | None) -> tuple[bytes, h5.FixedArray]:
    """The superblock, the root group's header (the dataset and its dimensions), the dataset's
    header, the dimensions' scales and the heap of their references, and the index's header
    and data block prefix, each after the one before."""
    shape = tuple(array.shape)
    names = dimension_names(array) or ()
    typed = h5.datatype(dtype)
    assert typed is not None
    attributes = attribute_messages(array.metadata.attributes, dtype, _fill_attribute(array, dtype, fill))
    scales = [scale_header(length) for length in shape] if names else []

    def root(dataset_at: int, scales_at: list[int]) -> bytes:
        links = [(DATASET, dataset_at), *zip(names, scales_at, strict=True)]
        return h5.object_header(h5.group_messages(links))

    def dataset(index_at: int, heap_at: int) -> bytes:
        messages = [h5.message(h5.DATASPACE, h5.dataspace(shape)),
                    h5.message(h5.DATATYPE, typed, flags=1),
                    h5.message(h5.FILL_VALUE, h5.fill_value(fill), flags=1),
                    h5.message(h5.LAYOUT, h5.chunked_layout(chunk, dtype.itemsize, index_at))]
        if filters:
            messages.append(h5.message(h5.FILTERS, h5.filter_pipeline(filters)))
        if names:
            messages.append(dimension_list(heap_at, 1, len(names)))
        return h5.object_header([*messages, *attributes])

    dataset_at = h5.SUPERBLOCK_SIZE + len(root(0, [0] * len(scales)))
    scales_at = list(itertools.accumulate([len(s) for s in scales], initial=dataset_at + len(dataset(0, 0))))
    heap_at = scales_at.pop()
    index_at = heap_at + (GLOBAL_HEAP_SIZE if names else 0)
    index = h5.FixedArray(index_at, count, size_length)
    parts = [h5.superblock(0, h5.SUPERBLOCK_SIZE), root(dataset_at, scales_at), dataset(index_at, heap_at),
             *scales, global_heap(scales_at) if names else b"", index.header(),
             index.prefix() if index.page_count else b""]
    return b"".join(parts), index
