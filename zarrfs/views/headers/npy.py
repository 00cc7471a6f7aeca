""".npy headers read back: arrays made by writing a .npy stream into a group. (`data.npy`
itself is its header, `formats.npy_header`, then `data`'s bytes: a `views.headered` file.)"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

# -- reading a .npy stream's header (arrays made by writing .npy files) -----------------------

NPY_MAGIC = b"\x93NUMPY"
_PREFIX_BYTES = {1: 10, 2: 12}  # magic, version, then the header's length in 2 or 4 bytes


class BadNpyHeader(ValueError):
    """Bytes that do not begin a .npy file numpy could load as a plain array."""


@dataclass(frozen=True)
class NpyHeader:
    length: int  # of the header, magic included: where the data begins
    shape: tuple[int, ...]
    dtype: np.dtype[Any]
    fortran_order: bool

    @property
    def data_bytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize


def npy_header_length(head: bytes) -> int | None:
    """Where the data of a .npy stream begins, from its first bytes (None: too few yet)."""
    if len(head) < len(NPY_MAGIC) + 2:
        if not NPY_MAGIC.startswith(head[: len(NPY_MAGIC)]):
            raise BadNpyHeader("not a .npy file (no magic string)")
        return None
    if not head.startswith(NPY_MAGIC) or head[6] not in _PREFIX_BYTES or head[7] != 0:
        raise BadNpyHeader("not a .npy file of version 1.0 or 2.0")
    prefix = _PREFIX_BYTES[head[6]]
    if len(head) < prefix:
        return None
    return prefix + int.from_bytes(head[8:prefix], "little")


def parse_npy_header(head: bytes) -> NpyHeader:
    """The header of a .npy stream whose first `npy_header_length` bytes are `head`."""
    length = npy_header_length(head)
    if length is None or len(head) < length:
        raise BadNpyHeader("the header is cut short")
    stream = io.BytesIO(head[:length])
    try:
        version = np.lib.format.read_magic(stream)
        formats = np.lib.format
        read = formats.read_array_header_1_0 if version == (1, 0) else formats.read_array_header_2_0
        shape, fortran, dtype = read(stream)
    except (ValueError, SyntaxError, TypeError) as e:
        raise BadNpyHeader(str(e)) from None
    if dtype.hasobject:
        raise BadNpyHeader(f"{dtype}: objects are not bytes")
    return NpyHeader(length, tuple(int(n) for n in shape), dtype, bool(fortran))
