"""The HDF5 structures `data.h5` is made of, as bytes: pure functions, no I/O.

What HDF5 1.10 and later read (File Format Specification version 3): superblock version 2,
object headers version 2, new-style (compact) groups of link messages, and chunked datasets
(layout message version 4) indexed by a fixed array, whose elements are laid out
arithmetically: any page of the index can be made from the chunk grid alone. Every structure
that the format checksums carries Jenkins' lookup3 (`checksum`), as the library verifies it.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

import numpy as np

UNDEFINED = (1 << 64) - 1  # (an address not allocated: a chunk not stored reads as fill)
SIGNATURE = b"\x89HDF\r\n\x1a\n"
SUPERBLOCK_SIZE = 48
# 64 index elements a page (the library's default is 1,024): a reader of one chunk makes the
# page holding it, a look at the stored sizes of its chunks, so a page is kept small.
PAGE_BITS = 6
_MASK = 0xFFFFFFFF

# Message types (III.C of the specification).
DATASPACE, LINK_INFO, DATATYPE, FILL_VALUE, LINK, LAYOUT, GROUP_INFO, FILTERS, ATTRIBUTE = (
    1, 2, 3, 5, 6, 8, 10, 11, 12)
DEFLATE, SHUFFLE, FLETCHER32, ZSTD_FILTER = 1, 2, 3, 32015


def _rot(value: int, count: int) -> int:
    return ((value << count) | (value >> (32 - count))) & _MASK


def _mix(a: int, b: int, c: int) -> tuple[int, int, int]:
    a = ((a - c) & _MASK) ^ _rot(c, 4)
    c = (c + b) & _MASK
    b = ((b - a) & _MASK) ^ _rot(a, 6)
    a = (a + c) & _MASK
    c = ((c - b) & _MASK) ^ _rot(b, 8)
    b = (b + a) & _MASK
    a = ((a - c) & _MASK) ^ _rot(c, 16)
    c = (c + b) & _MASK
    b = ((b - a) & _MASK) ^ _rot(a, 19)
    a = (a + c) & _MASK
    c = ((c - b) & _MASK) ^ _rot(b, 4)
    b = (b + a) & _MASK
    return a, b, c


def _final(a: int, b: int, c: int) -> int:
    c = ((c ^ b) - _rot(b, 14)) & _MASK
    a = ((a ^ c) - _rot(c, 11)) & _MASK
    b = ((b ^ a) - _rot(a, 25)) & _MASK
    c = ((c ^ b) - _rot(b, 16)) & _MASK
    a = ((a ^ c) - _rot(c, 4)) & _MASK
    b = ((b ^ a) - _rot(a, 14)) & _MASK
    return ((c ^ b) - _rot(b, 24)) & _MASK


def checksum(data: bytes | memoryview) -> int:
    """Bob Jenkins' lookup3 `hashlittle` with an initial value of 0, as HDF5's metadata
    checksum (H5_checksum_metadata)."""
    length = len(data)
    a = b = c = (0xDEADBEEF + length) & _MASK
    if length == 0:
        return c
    # (the last block of 1 to 12 bytes is taken padded with zeros, as the switch adds them)
    words = np.frombuffer(bytes(data) + bytes(-length % 12), dtype="<u4")
    triples = words.reshape(-1, 3).tolist()
    for x, y, z in triples[:-1]:
        a, b, c = _mix((a + x) & _MASK, (b + y) & _MASK, (c + z) & _MASK)
    x, y, z = triples[-1]
    return _final((a + x) & _MASK, (b + y) & _MASK, (c + z) & _MASK)


def with_checksum(data: bytes) -> bytes:
    return data + struct.pack("<I", checksum(data))


def superblock(end_of_file: int, root: int) -> bytes:
    """Version 2: 8-byte offsets and lengths, no extension, the root group's object header."""
    head = SIGNATURE + bytes([2, 8, 8, 0]) + struct.pack("<QQQQ", 0, UNDEFINED, end_of_file, root)
    return with_checksum(head)


def message(kind: int, body: bytes, flags: int = 0) -> bytes:
    return struct.pack("<BHB", kind, len(body), flags) + body


def object_header(messages: Sequence[bytes]) -> bytes:
    """Version 2, one chunk (its size in 4 bytes), no times, no attribute phase change."""
    body = b"".join(messages)
    return with_checksum(b"OHDR" + bytes([2, 2]) + struct.pack("<I", len(body)) + body)


# -- datasets ----------------------------------------------------------------------------------

def dataspace(shape: Sequence[int]) -> bytes:
    """Version 2: simple (scalar when `shape` is empty), its maximum its size."""
    return bytes([2, len(shape), 0, 1 if shape else 0]) + b"".join(struct.pack("<Q", n) for n in shape)


_FLOATS = {2: (15, 10, 5, 10, 15), 4: (31, 23, 8, 23, 127), 8: (63, 52, 11, 52, 1023)}


def datatype(dtype: np.dtype[Any]) -> bytes | None:
    """A fixed-point or IEEE floating-point datatype (version 1) in `dtype`'s byte order, a
    character (a one-byte ASCII string, netCDF's NC_CHAR), or None when HDF5 has no such type
    here."""
    size = dtype.itemsize
    if dtype.kind == "S" and size == 1:
        return bytes([0x13, 0, 0, 0]) + struct.pack("<I", 1)
    big = 1 if size > 1 and dtype.str[0] == ">" else 0
    if dtype.kind in "iu" and size in (1, 2, 4, 8):
        bits = big | (8 if dtype.kind == "i" else 0)
        return bytes([0x10, bits, 0, 0]) + struct.pack("<IHH", size, 0, size * 8)
    if dtype.kind == "c" and size // 2 in _FLOATS:
        return _complex(dtype)
    if dtype.kind == "f" and size in _FLOATS:
        sign, exponent, exponent_size, mantissa_size, bias = _FLOATS[size]
        bits = big | (2 << 4)  # (the mantissa's most significant bit implied)
        return (bytes([0x11, bits, sign, 0]) + struct.pack("<IHH", size, 0, size * 8)
                + bytes([exponent, exponent_size, 0, mantissa_size]) + struct.pack("<I", bias))
    return None


def _complex(dtype: np.dtype[Any]) -> bytes | None:
    """A compound {r, i} of two floats (version 3), as h5py and h5netcdf read complex."""
    part = datatype(np.dtype(f"{dtype.str[0]}f{dtype.itemsize // 2}"))
    assert part is not None
    width = 1 if dtype.itemsize < 256 else 2
    members = b"".join(name + offset.to_bytes(width, "little") + part
                       for name, offset in ((b"r\0", 0), (b"i\0", dtype.itemsize // 2)))
    return bytes([0x36, 2, 0, 0]) + struct.pack("<I", dtype.itemsize) + members


def fill_value(value: bytes) -> bytes:
    """Version 3: chunks allocated incrementally, fill written if set, this value defined."""
    return bytes([3, 0x03 | (2 << 2) | 0x20]) + struct.pack("<I", len(value)) + value


def contiguous_layout(address: int, size: int) -> bytes:
    """Version 3, contiguous: `size` bytes at `address` (a scalar's: HDF5 chunks no scalar)."""
    return bytes([3, 1]) + struct.pack("<QQ", address, size)


def chunked_layout(chunk: Sequence[int], itemsize: int, index: int) -> bytes:
    """Version 4, chunked, edge chunks filtered whole (as Zarr stores them), indexed by the
    fixed array at `index`."""
    dims = [*chunk, itemsize]
    width = max((n.bit_length() - 1 + 8) // 8 for n in dims)  # (as the library checks it)
    encoded = b"".join(n.to_bytes(width, "little") for n in dims)
    return bytes([4, 2, 0, len(dims), width]) + encoded + bytes([3, PAGE_BITS]) + struct.pack("<Q", index)


def filter_pipeline(filters: Sequence[tuple[int, Sequence[int]]]) -> bytes:
    """Version 2: each (filter id, client values), applied in this order as chunks are
    written; every one mandatory (a reader without it fails rather than reads garbage)."""
    out = bytearray([2, len(filters)])
    for ident, values in filters:
        out += struct.pack("<H", ident)
        if ident >= 256:
            out += struct.pack("<H", 0)  # (no name)
        out += struct.pack("<HH", 0, len(values)) + b"".join(struct.pack("<I", v) for v in values)
    return bytes(out)


def attribute(name: str, dtype_message: bytes, shape: Sequence[int], value: bytes) -> bytes:
    """Version 3 (ASCII/UTF-8 names without padding)."""
    encoded = name.encode() + b"\0"
    space = dataspace(shape)
    return (bytes([3, 0]) + struct.pack("<HHHB", len(encoded), len(dtype_message), len(space), 1)
            + encoded + dtype_message + space + value)


# -- groups ------------------------------------------------------------------------------------

def group_messages(links: Sequence[tuple[str, int]]) -> list[bytes]:
    """A new-style group holding its links in its header: link info (no heap, no index),
    group info, and a hard link per (name, object header address)."""
    info = bytes([0, 0]) + struct.pack("<QQ", UNDEFINED, UNDEFINED)
    return [message(LINK_INFO, info), message(GROUP_INFO, bytes([0, 0])),
            *(message(LINK, _hard_link(name, address)) for name, address in links)]


def _hard_link(name: str, address: int) -> bytes:
    encoded = name.encode()
    width = 0 if len(encoded) < 1 << 8 else 1 if len(encoded) < 1 << 16 else 2
    flags = width | 0x10  # (its character set given: UTF-8)
    return (bytes([1, flags, 1]) + len(encoded).to_bytes(1 << width, "little") + encoded
            + struct.pack("<Q", address))


# -- the fixed array chunk index ----------------------------------------------------------------

def chunk_size_length(chunk_bytes: int) -> int:
    """The bytes of a filtered chunk's size in an index element, as the library computes
    them from the chunk's decoded size (one more than it needs, at most 8)."""
    return min(8, 1 + ((chunk_bytes.bit_length() - 1) + 8) // 8)


class FixedArray:
    """A fixed array of `count` elements (chunk addresses; with `size_length`, filtered
    chunks: address, stored size, filter mask), its header at `at`: the header, the data
    block's prefix, and the pages after it, each at an offset computed from the grid."""

    HEADER_SIZE = 28

    def __init__(self, at: int, count: int, size_length: int | None) -> None:
        self.at = at
        self.count = count
        self.size_length = size_length
        self.element = 8 if size_length is None else 8 + size_length + 4
        self.page_count = 0 if count <= 1 << PAGE_BITS else -(-count // (1 << PAGE_BITS))
        self.block_at = at + self.HEADER_SIZE
        bitmap = -(-self.page_count // 8)
        # (signature, version, client, header address; a paged block's bitmap and checksum)
        self.prefix_size = 4 + 1 + 8 + 1 + (bitmap + 4 if self.page_count else 0)
        self.pages_at = self.block_at + self.prefix_size
        self.page_size = (1 << PAGE_BITS) * self.element + 4
        self.end = self.pages_at + self.page_count * 4 + count * self.element + (0 if self.page_count else 4)

    @property
    def client(self) -> int:
        return 0 if self.size_length is None else 1

    def header(self) -> bytes:
        return with_checksum(b"FAHD" + bytes([0, self.client, self.element, PAGE_BITS])
                             + struct.pack("<QQ", self.count, self.block_at))

    def prefix(self) -> bytes:
        """The data block up to its elements (paged: with every page marked initialized)."""
        head = b"FADB" + bytes([0, self.client]) + struct.pack("<Q", self.at)
        if not self.page_count:
            return head
        bitmap = bytearray(b"\xff" * (self.page_count // 8))
        if self.page_count % 8:
            bitmap.append((0xFF << (8 - self.page_count % 8)) & 0xFF)
        return with_checksum(head + bytes(bitmap))

    @property
    def runs_at(self) -> int:
        """Where the runs of elements start (an unpaged block's: the block itself)."""
        return self.pages_at if self.page_count else self.block_at

    def pages(self) -> int:
        """How many runs of elements there are: pages, or the one run of an unpaged block."""
        return self.page_count or 1

    def page_span(self, page: int) -> tuple[int, int]:
        """The first element of run `page` and how many it holds."""
        if not self.page_count:
            return 0, self.count
        first = page << PAGE_BITS
        return first, min(1 << PAGE_BITS, self.count - first)

    def page_at(self, page: int) -> int:
        """Where run `page` starts (an unpaged block's one run: the block, prefix and all)."""
        return self.pages_at + page * self.page_size if self.page_count else self.block_at

    def page_run_size(self, page: int) -> int:
        own = self.page_span(page)[1] * self.element + 4
        return own if self.page_count else own + len(self.prefix())

    def page_bytes(self, page: int, elements: Sequence[tuple[int, int]]) -> bytes:
        """Run `page` with its checksum, from (address, stored size) per element."""
        if self.size_length is None:
            body = b"".join(struct.pack("<Q", address) for address, _ in elements)
        else:
            length = self.size_length
            body = b"".join(struct.pack("<Q", address) + size.to_bytes(length, "little") + bytes(4)
                            for address, size in elements)
        return with_checksum(body if self.page_count else self.prefix() + body)

    def run_containing(self, offset: int) -> int:
        """The run holding file offset `offset` (within the runs)."""
        return (offset - self.pages_at) // self.page_size if self.page_count else 0
