"""`data.h5` of a scalar (a rank-0 array): HDF5 chunks no scalar, so its dataset has a scalar
dataspace and a contiguous layout, its one element on the page after the metadata, read from
the array (decoded, in the file's type) when that page is read: the layout still needs no
store request. Its attributes and `_FillValue` are an array's (`hdf5_view.dataset_header`).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import numpy as np

from ..grid import Box
from . import hdf5_format as h5
from .files import MadeView, ReadOnlyFile
from .hdf5_chunks import ALIGN
from .hdf5_view import DATASET, Dataset, H5Array, dataset_header, file_dtype, h5_file, shows_array_h5
from .placement import Placement
from .tiff_view import TiffArray


def shows_h5(array: TiffArray) -> bool:
    """Whether an array's directory has `data.h5`: a chunked dataset's, or a scalar's."""
    return shows_array_h5(array) or (len(array.shape) == 0 and file_dtype(array, None, "little") is not None)


def h5_any_file(array: H5Array, byteorder: str, placement: Callable[[], Placement]) -> MadeView:
    """The array's `data.h5` (one `shows_h5` shows)."""
    return ScalarFile(array, byteorder) if len(array.shape) == 0 else h5_file(array, byteorder, placement)


class ScalarFile(ReadOnlyFile):
    """The superblock, the root group (its one link), the dataset's header, then, at the next
    page, the element."""

    direct_io = True  # (the element is read again at each read: a write shows at once)

    def __init__(self, array: H5Array, byteorder: str) -> None:
        dtype = file_dtype(array, None, byteorder)
        assert dtype is not None
        fill = np.asarray(array.fill_chunk).reshape(-1)[:1].astype(dtype).tobytes()
        self.array, self.dtype = array, dtype
        dataset = Dataset(array, dtype, None, fill)

        def layout(at: int) -> bytes:
            return bytes([3, 1]) + struct.pack("<QQ", at, dtype.itemsize)  # (contiguous)

        root = h5.object_header(h5.group_messages([(DATASET, 0)]))
        dataset_at = h5.SUPERBLOCK_SIZE + len(root)
        head_end = dataset_at + len(dataset_header(dataset, 0, [], layout(0)))
        self.element_at = -(-head_end // ALIGN) * ALIGN
        self.size = self.element_at + dtype.itemsize
        self._head = (h5.superblock(self.size, h5.SUPERBLOCK_SIZE)
                      + h5.object_header(h5.group_messages([(DATASET, dataset_at)]))
                      + dataset_header(dataset, 0, [], layout(self.element_at)))

    def read(self, offset: int, size: int) -> bytes:
        end = min(offset + size, self.size)
        whole = self._head + bytes(self.element_at - len(self._head))
        if end > self.element_at:
            whole += self._element()
        return whole[offset:end]

    def _element(self) -> bytes:
        values: Any = self.array.read_boxes([Box((), ())])[0]
        return np.asarray(values).astype(self.dtype).tobytes()

    def forget_fetched(self) -> None:
        return None
