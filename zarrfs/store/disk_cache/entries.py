"""The file of one disk cache entry (`disk_cache`): written whole, read whole or a byte range
of it, and whatever is read checked first.

A file holds a header (format, the data's length and CRC-32C, the digest that names the
entry), the CRC-32C of each 256 KiB piece of the data, the CRC-32C of those two, then the
data. A whole read is checked by the data's CRC; a byte range (an inner chunk of a shard
cached whole) reads and checks only the pieces holding it, not the whole file. CRC-32C: the
processor computes it, 2.5x faster than CRC-32.
"""

from __future__ import annotations

import os
import struct

import numpy as np
from google_crc32c import value as crc32c

MAGIC = b"ZARRFSDC"
VERSION = 2  # (1: one CRC-32 of the data)
PIECE = 256 << 10  # (bytes a range read checks at least)
# magic, version, data length, data CRC-32C, digest; the pieces' CRC-32Cs; the CRC-32C of all that.
_FIELDS = struct.Struct("<8sIQI32s")


def overhead(length: int) -> int:
    """The bytes an entry's file holds besides its `length` bytes of data."""
    return _FIELDS.size + 4 * _pieces(length) + 4


def _pieces(length: int) -> int:
    return -(-length // PIECE)


def header(name: str, data: bytes) -> bytes:
    """What an entry's file holds before `data` (its digest `name`)."""
    fields = _FIELDS.pack(MAGIC, VERSION, len(data), crc32c(data), bytes.fromhex(name))
    table = b"".join(int(crc32c(data[i : i + PIECE])).to_bytes(4, "little")
                     for i in range(0, len(data), PIECE))
    return fields + table + int(crc32c(fields + table)).to_bytes(4, "little")


def length(fd: int, name: str) -> int | None:
    """The length of the data of the entry file `fd` as its header says (None: not an entry
    named `name`, or not as long as its header says)."""
    return _length(fd, os.pread(fd, _FIELDS.size, 0), name)


def _length(fd: int, fields: bytes, name: str) -> int | None:
    if len(fields) != _FIELDS.size:
        return None
    magic, version, size, _, digest = _FIELDS.unpack(fields)
    if magic != MAGIC or version != VERSION or digest != bytes.fromhex(name):
        return None
    # (the file's own length first: a damaged length is never trusted to read by)
    return int(size) if os.fstat(fd).st_size == overhead(size) + size else None


def _sound_header(fd: int, name: str) -> tuple[int, int, bytes] | None:
    """The data's length and CRC-32C, and the pieces' CRC-32Cs, of the entry file `fd`, if
    its header and table hold (None: not an entry named `name`, torn or damaged)."""
    fields = os.pread(fd, _FIELDS.size, 0)
    size = _length(fd, fields, name)
    if size is None:
        return None
    table_size = 4 * _pieces(size)
    rest = os.pread(fd, table_size + 4, _FIELDS.size)
    sound = (len(rest) == table_size + 4
             and crc32c(fields + rest[:table_size]) == int.from_bytes(rest[table_size:], "little"))
    return (size, _FIELDS.unpack(fields)[3], rest) if sound else None


def data_of(fd: int, name: str) -> tuple[int, int, int] | None:
    """Where the data of the entry file `fd` lies and what it must be, for a reader elsewhere
    to read and check (`values.read_opened`): its offset, length and CRC-32C, if the header
    and table hold (None: a torn or damaged file)."""
    found = _sound_header(fd, name)
    return None if found is None else (overhead(found[0]), found[0], found[1])


def read(fd: int, name: str, start: int = 0, length: int = -1) -> bytes | memoryview | None:
    """Bytes [start, start + length) of the data of the entry file `fd` (length -1: all of
    it, past its end: those there are), read straight into what is returned, if the header
    and the checksums of what was read hold (None: a torn or damaged file)."""
    found = _sound_header(fd, name)
    if found is None:
        return None
    size, crc, rest = found
    at = overhead(size)
    if length < 0 or (start == 0 and length >= size):
        data = os.pread(fd, size, at)
        return data if len(data) == size and crc32c(data) == crc else None
    stop = min(start + length, size)
    if start >= stop:
        return b""
    first, end = start // PIECE * PIECE, min(-(-stop // PIECE) * PIECE, size)
    pieces = os.pread(fd, end - first, at + first)  # (the pieces holding the range, in one read)
    if len(pieces) != end - first:
        return None
    for i in range(first // PIECE, -(-end // PIECE)):
        piece = np.frombuffer(pieces, np.uint8, min(PIECE, end - i * PIECE), i * PIECE - first)
        if crc32c(piece) != int.from_bytes(rest[4 * i : 4 * i + 4], "little"):
            return None
    return memoryview(pieces)[start - first : stop - first]
