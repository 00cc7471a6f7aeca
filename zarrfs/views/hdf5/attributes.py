"""An array's attributes as HDF5 attribute messages, typed as netCDF-4 types them: text as a
scalar string, numbers (one or a list) as the netCDF type `data.nc` gives them, whatever else
as its JSON text; and `_FillValue` of the dataset's own type, as netCDF-C writes it."""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..netcdf_model import NC_CHAR, NC_DTYPES, Attribute
from . import structures as h5

# Kept by zarrfs's other views and by Zarr itself, not attributes a netCDF reader should see.
_LEFT_OUT = frozenset({"_ARRAY_DIMENSIONS", "_FillValue"})
# The most an object header's messages hold here (a message's size is a 16-bit field).
_MAX_MESSAGE = 60000


def text_type(text: bytes) -> bytes:
    """Version 1 fixed-length string of `text`'s length, null-terminated: ASCII when it is
    (as netCDF-C writes text; h5py 2, on HDF5 1.8, reads no fixed-length UTF-8), else UTF-8."""
    charset = 0x00 if text.isascii() else 0x10
    return bytes([0x13, charset, 0, 0]) + struct.pack("<I", max(1, len(text)))


def attribute_messages(attributes: Mapping[str, Any], dtype: np.dtype[Any],
                       fill: bytes | None) -> list[bytes]:
    """The attributes' messages (those a message cannot hold left out), `_FillValue` first
    when given."""
    made = [] if fill is None else [_message("_FillValue", h5.datatype(dtype) or b"", (1,), fill)]
    for name, value in attributes.items():
        if name in _LEFT_OUT:
            continue
        typed = Attribute.of(name, value)
        message = _typed_message(typed)
        if message is not None and len(message) < _MAX_MESSAGE:
            made.append(message)
    return made


def _typed_message(attribute: Attribute) -> bytes | None:
    if attribute.nc_type == NC_CHAR:
        text = attribute.values
        return _message(attribute.name, text_type(text + b"\0"), (), text + b"\0")
    dtype = np.dtype(NC_DTYPES[attribute.nc_type])
    typed = h5.datatype(dtype)
    if typed is None:
        return None
    return _message(attribute.name, typed, (attribute.count,), attribute.values)


def _message(name: str, typed: bytes, shape: tuple[int, ...], value: bytes) -> bytes:
    return h5.message(h5.ATTRIBUTE, h5.attribute(name, typed, shape, value))
