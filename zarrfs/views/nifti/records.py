"""The NIfTI-1 and NIfTI-2 headers as numpy records (the layout nibabel's `header_dtype`
has, with its arrays grouped: `intent_p`, `quatern`, `qoffset`, `sform`), read from and
written to bytes in either byte order, with their extensions. Pure.

Work is done on one record of NIfTI-2's fields in native order (`new_record`): they hold every
NIfTI-1 value but the ANALYZE fields nothing reads, so a stored NIfTI-1 header can be written
as NIfTI-2 when a level outgrows NIfTI-1's 16-bit dimensions, and the other way round."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

__all__ = ["NIFTI1", "NIFTI2", "Extension", "Parsed", "encode", "new_record", "parse"]

NIFTI1 = np.dtype([
    ("sizeof_hdr", "i4"), ("data_type", "S10"), ("db_name", "S18"), ("extents", "i4"),
    ("session_error", "i2"), ("regular", "S1"), ("dim_info", "u1"), ("dim", "i2", (8,)),
    ("intent_p", "f4", (3,)), ("intent_code", "i2"), ("datatype", "i2"), ("bitpix", "i2"),
    ("slice_start", "i2"), ("pixdim", "f4", (8,)), ("vox_offset", "f4"), ("scl_slope", "f4"),
    ("scl_inter", "f4"), ("slice_end", "i2"), ("slice_code", "u1"), ("xyzt_units", "u1"),
    ("cal_max", "f4"), ("cal_min", "f4"), ("slice_duration", "f4"), ("toffset", "f4"),
    ("glmax", "i4"), ("glmin", "i4"), ("descrip", "S80"), ("aux_file", "S24"), ("qform_code", "i2"),
    ("sform_code", "i2"), ("quatern", "f4", (3,)), ("qoffset", "f4", (3,)), ("sform", "f4", (3, 4)),
    ("intent_name", "S16"), ("magic", "S4"),
])
NIFTI2 = np.dtype([
    ("sizeof_hdr", "i4"), ("magic", "S8"), ("datatype", "i2"), ("bitpix", "i2"), ("dim", "i8", (8,)),
    ("intent_p", "f8", (3,)), ("pixdim", "f8", (8,)), ("vox_offset", "i8"), ("scl_slope", "f8"),
    ("scl_inter", "f8"), ("cal_max", "f8"), ("cal_min", "f8"), ("slice_duration", "f8"),
    ("toffset", "f8"), ("slice_start", "i8"), ("slice_end", "i8"), ("descrip", "S80"),
    ("aux_file", "S24"), ("qform_code", "i4"), ("sform_code", "i4"), ("quatern", "f8", (3,)),
    ("qoffset", "f8", (3,)), ("sform", "f8", (3, 4)), ("slice_code", "i4"), ("xyzt_units", "i4"),
    ("intent_code", "i4"), ("intent_name", "S16"), ("dim_info", "u1"), ("unused_str", "S15"),
])
_MAGIC = {1: b"n+1", 2: b"n+2\0\r\n\x1a\n"}  # (single file: header, extensions and data in one)
_STORED_MAGIC = {1: (b"n+1", b"ni1"), 2: (b"n+2", b"ni2")}  # (ni: a .hdr beside an .img)
_LAYOUTS = {1: NIFTI1, 2: NIFTI2}
_EXTENSION_ALIGNMENT = 16  # (an extension's esize is a multiple of 16)
ByteOrder = Literal["<", ">"]
_ORDERS: dict[ByteOrder, Literal["little", "big"]] = {"<": "little", ">": "big"}


@dataclass(frozen=True)
class Extension:
    code: int
    content: bytes  # (padded to the 16-byte multiple it is stored in, less esize and ecode)


@dataclass(frozen=True)
class Parsed:
    version: int
    record: Any  # a 0-d array of NIFTI2 in native order
    extensions: tuple[Extension, ...]


def new_record() -> Any:
    return np.zeros((), NIFTI2)


def parse(contents: bytes) -> Parsed | None:
    """A stored NIfTI-1 or NIfTI-2 header (and the extensions after it), in either byte order;
    None when the bytes are neither."""
    for version, layout in _LAYOUTS.items():
        for order in _ORDERS:
            size = layout.itemsize
            if len(contents) < size or int.from_bytes(contents[:4], _ORDERS[order]) != size:
                continue
            stored = np.frombuffer(contents[:size], layout.newbyteorder(order))[0]
            if bytes(stored["magic"]).rstrip(b"\0")[:3] not in _STORED_MAGIC[version]:
                return None
            record = new_record()
            for name in _common_fields(layout):
                record[name] = stored[name]
            return Parsed(version, record, _extensions(contents[size:], order))
    return None


def encode(record: Any, version: int, order: ByteOrder, extensions: tuple[Extension, ...]) -> bytes:
    """The header as a single-file NIfTI of `version` in byte order `order` ("<" or ">"), then
    its extensions; `vox_offset` is set to where the data begins, just after them."""
    layout = _LAYOUTS[version]
    written = np.zeros((), layout.newbyteorder(order))
    for name in _common_fields(layout):
        written[name] = record[name]
    tail = _extension_bytes(extensions, order)
    written["sizeof_hdr"] = layout.itemsize
    written["magic"] = _MAGIC[version]
    written["vox_offset"] = layout.itemsize + len(tail)
    if version == 1:
        written["regular"] = b"r"  # (ANALYZE's "all images the same size", which readers expect)
    return written.tobytes() + tail


def _common_fields(layout: np.dtype[Any]) -> list[str]:
    return [name for name in layout.names or () if name in (NIFTI2.names or ())]


def _extensions(after: bytes, order: ByteOrder) -> tuple[Extension, ...]:
    """The extensions after the header: a flag of 4 bytes, then (esize, ecode, content) each
    (a malformed one ends them: what came before is kept)."""
    if len(after) < 4 or after[0] == 0:
        return ()
    found, offset = [], 4
    while offset + 8 <= len(after):
        size, code = (int.from_bytes(after[offset + i : offset + i + 4], _ORDERS[order], signed=True)
                      for i in (0, 4))
        if size < _EXTENSION_ALIGNMENT or size % _EXTENSION_ALIGNMENT or offset + size > len(after):
            break
        found.append(Extension(code, after[offset + 8 : offset + size]))
        offset += size
    return tuple(found)


def _extension_bytes(extensions: tuple[Extension, ...], order: ByteOrder) -> bytes:
    parts = [bytes([1 if extensions else 0, 0, 0, 0])]
    for extension in extensions:
        content = extension.content + b"\0" * (-(8 + len(extension.content)) % _EXTENSION_ALIGNMENT)
        parts.append((8 + len(content)).to_bytes(4, _ORDERS[order]) +
                     extension.code.to_bytes(4, _ORDERS[order], signed=True) + content)
    return b"".join(parts)
