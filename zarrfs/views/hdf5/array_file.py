"""`data.h5`: an array as one chunked HDF5 dataset (NetCDF-4's data model), read-only.

The dataset's chunks are the array's read chunks (a shard's inner chunks). Where they are
stored as HDF5's filters decode them (`filters`: `bytes`, a byte shuffle, zstd, zlib,
blosc or bzip2, fletcher32), a chunk in the file is the stored bytes as they are, in the
stored byte order:
`H5Dread_chunk` returns the stored chunk. Other chunks go out decoded, unfiltered, in the
mount's byte order.

The layout is computed from the array's shape and codecs alone, at no store request: the
metadata first, then the B-tree indexing the chunks, made as it is read, then a slot per
chunk (`dataset_chunks`). A group's file holds its arrays' datasets so (`group_file`).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ...codecs.pipeline import Pipeline
from ...codecs.stored_form import StoredForm
from ...formats.description import ArrayDescription
from ...grid import cell_count
from ..files import FileForm, StoredArray
from ..netcdf_model import valid_name
from ..placement import fill_number
from ..plugins import PLUGIN_FILTERS
from . import structures as h5
from .attributes import attribute_messages
from .dataset_chunks import ChunkedFile, DatasetChunks, DatasetPart, ScalarSlot, Tails
from .dimensions import GLOBAL_HEAP_SIZE, dimension_list, global_heap, scale_header
from .filters import Filtered, filtered
from .time_types import time_attributes, time_counts

H5_NAME = "data.h5"
DATASET = "data"  # (the dataset's name in an array's file, as the flat file beside it)
# Past this many chunks data.h5 is left out, as it was when its index needed a bit a page made
# with the file; the B-tree costs nothing to make, but 2^26 slots of chunks up to 64 GiB also
# keep every offset in the file under 2^62.
MAX_CHUNKS = 1 << 26


class H5Array(StoredArray, Protocol):
    """What the view needs of an array beyond `data.tif`'s: its chunk of fill values."""

    @property
    def fill_chunk(self) -> np.ndarray: ...
    @property
    def metadata(self) -> ArrayDescription: ...
    @property
    def pipeline(self) -> Pipeline: ...
    @property
    def sharding(self) -> Any: ...  # (a ShardingCodec, or None: its `inner` pipeline)


def file_dtype(array: StoredArray, form: StoredForm | None, byteorder: str) -> np.dtype[Any] | None:
    """The dataset's element type, or None when HDF5 here has none for the array's."""
    storage = array.data_type.storage
    if array.data_type.kind == "bool":
        return np.dtype("i1")  # (its bytes as stored: 0 and 1; xarray's `dtype` mark says bool)
    if array.data_type.kind == "datetime":
        storage = time_counts(storage) or storage  # (CF's integers; none: no data.h5)
    elif array.data_type.kind not in ("int", "float", "complex"):
        return None
    if array.data_type.sub_byte_bits is not None or array.data_type.int_range is not None:
        info = np.iinfo(storage) if storage.kind in "iu" else None
        if info is None or array.data_type.int_range != (int(info.min), int(info.max)):
            return None
    order = form.byteorder if form is not None and form.byteorder else byteorder
    dtype = storage.newbyteorder("<" if order == "little" else ">")
    return dtype if h5.datatype(dtype) is not None else None


def shows_array_h5(array: StoredArray) -> bool:
    """No empty dimension, a type HDF5 holds, at most MAX_CHUNKS chunks (a scalar: one)."""
    if not (array.regular_read_chunks and 0 not in array.shape):
        return False
    fits = cell_count(array.shape, array.read_chunk_shape) <= MAX_CHUNKS
    return fits and file_dtype(array, None, "little") is not None


def passed_through(array: H5Array, plugins: bool) -> Filtered | None:
    """The filters that decode the array's read chunks as stored, or None (decoded here);
    filters of plugins only when the reader is taken to have them (`plugins`)."""
    if not array.metadata.is_regular:
        return None  # (the shards of a rectilinear grid: each has an index of its own shape)
    pipeline = array.sharding.inner if array.sharding else array.pipeline
    return filtered(pipeline, array.data_type.itemsize, plugins=plugins)


@dataclass(frozen=True)
class H5Dataset:
    """An array as an HDF5 dataset: its element type in the file, the filters that decode its
    chunks as stored (None: decoded here), and its fill value's bytes."""

    array: H5Array
    dtype: np.dtype[Any]
    through: Filtered | None
    fill: bytes

    def chunks(self, at: int, tails: Tails) -> DatasetPart:
        """Its part of the file from `at`: its index and its chunks' slots; a scalar's element
        (no `tails`: every size is known)."""
        if not self.array.shape:
            return ScalarSlot(self.array, self.dtype, at)
        return DatasetChunks(self.array, self.dtype, self.through, at)

    def header(self, part_at: int, extra: Sequence[bytes], fill_at: int = 0) -> bytes:
        return dataset_header(self, part_at, extra)

    def fill_heap(self) -> bytes:
        return b""  # (its fill value is in its header)


class AnyDataset(Protocol):
    """A dataset of a `data.h5`: numbers (`H5Dataset`) or strings (`strings`)."""

    @property
    def array(self) -> Any: ...
    def chunks(self, at: int, tails: Tails) -> DatasetPart:
        """Its part of the file from `at`, its parts of unknown size added to `tails`."""
    def header(self, part_at: int, extra: Sequence[bytes], fill_at: int = 0) -> bytes:
        """Its object header, its part at `part_at`, with the messages `extra` (its
        dimensions) before its attributes, its `fill_heap` at `fill_at`."""
    def fill_heap(self) -> bytes:
        """A global heap collection its `_FillValue` refers to, which the file places among
        its metadata (b"": none)."""


def h5_dataset(array: H5Array, form: FileForm) -> H5Dataset:
    """`array` (one `shows_array_h5` shows) as a dataset, its written bytes stored first."""
    # (HDF5 filters chunks)
    through = passed_through(array, form.options[PLUGIN_FILTERS]) if array.shape else None
    dtype = file_dtype(array, through.form if through else None, form.byteorder)
    assert dtype is not None
    if through and array.dirty_bytes:
        array.flush()  # (the file shows what is stored)
    fill = np.asarray(array.fill_chunk).reshape(-1)[:1].astype(dtype).tobytes()
    return H5Dataset(array, dtype, through, fill)


def dataset_file(dataset: AnyDataset) -> ChunkedFile:
    """An array's file: its one dataset, named `DATASET`."""
    head, index_at = _metadata(dataset)
    tails = Tails()
    return ChunkedFile(head, [dataset.chunks(index_at, tails)], tails)


def dataset_header(dataset: H5Dataset, part_at: int, extra: Sequence[bytes]) -> bytes:
    """The dataset's object header, its part of the file (`H5Dataset.chunks`) at `part_at`, with
    the messages `extra` (its dimensions) before its attributes."""
    array, dtype = dataset.array, dataset.dtype
    typed = h5.datatype(dtype)
    assert typed is not None
    if array.shape:
        layout = h5.chunked_layout(tuple(array.read_chunk_shape), dtype.itemsize, part_at)
    else:
        layout = h5.contiguous_layout(part_at, dtype.itemsize)
    messages = [h5.message(h5.DATASPACE, h5.dataspace(tuple(array.shape))),
                h5.message(h5.DATATYPE, typed, flags=1),
                h5.message(h5.FILL_VALUE, h5.fill_value(dataset.fill), flags=1),
                h5.message(h5.LAYOUT, layout)]
    if dataset.through and dataset.through.filters:
        messages.append(h5.message(h5.FILTERS, h5.filter_pipeline(dataset.through.filters)))
    fill = _fill_attribute(array, dtype, dataset.fill)
    attributes = attribute_messages(_attributes(array), dtype, fill)
    return h5.object_header([*messages, *extra, *attributes])


def _attributes(array: H5Array) -> Mapping[str, Any]:
    """The array's attributes, and xarray's marks of booleans kept as bytes (as `data.nc`) and
    of times kept as counts (`time_types`)."""
    attributes = {**time_attributes(array.data_type.storage), **array.metadata.attributes}
    if array.data_type.kind == "bool" and "dtype" not in attributes:
        return {**attributes, "dtype": "bool"}
    return attributes


def named_dimensions(array: H5Array) -> tuple[str, ...] | None:
    """The dimensions' names (v3 `dimension_names`, xarray's v2 `_ARRAY_DIMENSIONS`) when every
    one is a distinct netCDF name; else None (netCDF's phony ones)."""
    metadata = array.metadata
    names = metadata.dimension_names or metadata.attributes.get("_ARRAY_DIMENSIONS")
    if not isinstance(names, list | tuple) or len(names) != len(array.shape):
        return None
    if not all(isinstance(n, str) and valid_name(n) for n in names):
        return None
    found = tuple(str(n) for n in names)
    return found if len(set(found)) == len(found) else None


def dimension_names(array: H5Array) -> tuple[str, ...] | None:
    """The named dimensions of an array's own file (none named as its dataset)."""
    found = named_dimensions(array)
    return None if found is None or DATASET in found else found


def _fill_attribute(array: H5Array, dtype: np.dtype[Any], fill: bytes) -> bytes | None:
    """`_FillValue` as xarray reads it: the attribute, else the fill value a v2 array of
    xarray's (`_ARRAY_DIMENSIONS`: it keeps `_FillValue` there) states, else none (xarray masks
    no v3 array by its fill value: a v3 coordinate of integers from 0 keeps its 0)."""
    attributes = array.metadata.attributes
    if "_FillValue" not in attributes:
        stated = "_ARRAY_DIMENSIONS" in attributes and array.metadata.fill_value_stated
        return fill if stated else None
    value = attributes["_FillValue"]
    number = value if isinstance(value, int) and not isinstance(value, bool) else fill_number(value)
    if number is None:
        return None
    with np.errstate(all="ignore"):
        return np.asarray(number).astype(dtype).reshape(-1)[:1].tobytes()


def _metadata(dataset: AnyDataset) -> tuple[bytes, int]:
    """The superblock, the root group's header (the dataset and its dimensions), the dataset's
    header, the dimensions' scales, the heap of their references and the dataset's fill
    value's; and where the index's header goes, after them."""
    shape = tuple(dataset.array.shape)
    names = dimension_names(dataset.array) or ()

    def root(dataset_at: int, scales_at: list[int]) -> bytes:
        links = [(DATASET, dataset_at), *zip(names, scales_at, strict=True)]
        return h5.object_header(h5.group_messages(links))

    def header(index_at: int, heap_at: int, fill_at: int) -> bytes:
        dimensions = [dimension_list(heap_at, 1, len(names))] if names else []
        return dataset.header(index_at, dimensions, fill_at)

    dataset_at = h5.FILE_HEAD_SIZE + len(root(0, [0] * len(names)))
    scales = [scale_header(length, [(dataset_at, i)]) for i, length in enumerate(shape)] if names else []
    scales_start = dataset_at + len(header(0, 0, 0))
    scales_at = list(itertools.accumulate([len(s) for s in scales], initial=scales_start))
    heap_at = scales_at.pop()
    fill_heap = dataset.fill_heap()
    fill_at = heap_at + (GLOBAL_HEAP_SIZE if names else 0)
    index_at = fill_at + len(fill_heap)
    parts = [h5.file_head(0), root(dataset_at, scales_at),
             header(index_at, heap_at, fill_at), *scales, global_heap(scales_at) if names else b"", fill_heap]
    return b"".join(parts), index_at
