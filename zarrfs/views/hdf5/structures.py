"""The HDF5 structures `data.h5` is made of, as bytes: pure functions, no I/O.

What HDF5 1.8 and later read, as netCDF-C writes by default: superblock version 2 (with an
extension giving the chunk B-trees' K), object headers version 2, new-style (compact) groups
of link messages, and chunked datasets (layout message version 3) indexed by a version-1
B-tree, which HDF5 1.8, netCDF-Java, pyfive and jsfive all read. The tree's nodes are laid
out arithmetically: any node can be made from the chunk grid alone (its leaves with the
chunks' sizes). Every structure that the format checksums carries Jenkins' lookup3
(`checksum`), as the library verifies it.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

import numpy as np

UNDEFINED = (1 << 64) - 1  # (an address not allocated: a chunk not stored reads as fill)
SIGNATURE = b"\x89HDF\r\n\x1a\n"
SUPERBLOCK_SIZE = 48
_MASK = 0xFFFFFFFF

# Message types (III.C of the specification).
DATASPACE, LINK_INFO, DATATYPE, FILL_VALUE, LINK, LAYOUT, GROUP_INFO, FILTERS, ATTRIBUTE, BTREE_K_VALUES = (
    1, 2, 3, 5, 6, 8, 10, 11, 12, 19)
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
    """Version 2: 8-byte offsets and lengths, its extension right after it (`EXTENSION`),
    the root group's object header at `root`."""
    head = SIGNATURE + bytes([2, 8, 8, 0]) + struct.pack("<QQQQ", 0, SUPERBLOCK_SIZE, end_of_file, root)
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
    """Version 3, chunked (edge chunks filtered whole, as Zarr stores them), indexed by the
    version-1 B-tree whose root is at `index`."""
    dims = [*chunk, itemsize]
    return bytes([3, 2, len(dims)]) + struct.pack("<Q", index) + b"".join(struct.pack("<I", n) for n in dims)


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


# -- the version-1 B-tree indexing a dataset's chunks ------------------------------------------

# The chunk B-trees' K, which the superblock's extension gives (H5Pset_istore_k's; the library's
# default is 32): every node holds up to 2K entries and is read whole, so nodes are laid out at
# that size. A reader that walks the whole index (HDF5 sums the chunks' sizes for `h5ls -v`)
# reads every node, each a request of the mount: 10^6 chunks are 1,954 leaves of 20 KiB (15,625
# of 2.6 KiB with K = 32, half a second of requests alone). One chunk is found through 3 nodes.
BTREE_K = 256
NODE_ENTRIES = 2 * BTREE_K
_NODE_PREFIX = 24  # (signature, type, level, entries used, left and right siblings)
# The superblock's extension: an object header of the B-tree K values (version 0: the chunk
# trees' K, then the groups' internal and leaf K at the library's defaults, which no group
# here uses: their links are in their headers).
EXTENSION = object_header([message(BTREE_K_VALUES, bytes([0]) + struct.pack("<HHH", BTREE_K, 16, 4))])
FILE_HEAD_SIZE = SUPERBLOCK_SIZE + len(EXTENSION)  # (where the root group's header goes)


def file_head(end_of_file: int) -> bytes:
    """The superblock and its extension, the root group's header after them."""
    return superblock(end_of_file, FILE_HEAD_SIZE) + EXTENSION


class ChunkBTree:
    """A version-1 B-tree of raw data chunks (type 1) over a grid's chunks in C order, every
    node full-sized and placed from the root at `at`, level by level: where a node lies, which
    chunks it spans and its internal keys follow from the grid alone. A leaf's entries (each
    chunk's stored size and address) are the caller's; chunks are keyed by their first
    element (and a last offset of 0, in the element's bytes, as HDF5 keys them)."""

    def __init__(self, at: int, grid: Sequence[int], chunk: Sequence[int], itemsize: int) -> None:
        self.at, self.grid, self.itemsize = at, tuple(grid), itemsize
        self.chunk = np.array([*chunk, itemsize], dtype="<u8")
        self.count = int(np.prod(self.grid, dtype=np.int64))
        self.key = np.dtype([("size", "<u4"), ("mask", "<u4"), ("offsets", "<u8", (len(self.grid) + 1,))])
        self.node_size = _NODE_PREFIX + (NODE_ENTRIES + 1) * self.key.itemsize + NODE_ENTRIES * 8
        counts = [-(-self.count // NODE_ENTRIES)]  # (nodes at each level, the leaves' first)
        while counts[-1] > 1:
            counts.append(-(-counts[-1] // NODE_ENTRIES))
        self.counts = counts
        self.firsts = {level: sum(counts[level + 1:]) for level in range(len(counts))}  # (in file order)
        self.end = at + sum(counts) * self.node_size

    @property
    def root_level(self) -> int:
        return len(self.counts) - 1

    def node_at(self, level: int, number: int) -> int:
        return self.at + (self.firsts[level] + number) * self.node_size

    def node_containing(self, offset: int) -> tuple[int, int]:
        """The (level, number) of the node holding file offset `offset` (within the tree)."""
        place = (offset - self.at) // self.node_size
        level = next(level for level in range(len(self.counts)) if place >= self.firsts[level])
        return level, place - self.firsts[level]

    def span(self, level: int, number: int) -> range:
        """The chunks (by their number in C order) under the node."""
        width = NODE_ENTRIES ** (level + 1)
        return range(number * width, min(self.count, (number + 1) * width))

    def offsets(self, numbers: Sequence[int] | np.ndarray) -> np.ndarray:
        """Each chunk's key offsets: its first element, then 0."""
        units = np.stack(np.unravel_index(np.asarray(numbers, dtype=np.int64), self.grid), axis=-1)
        found = np.zeros((len(units), len(self.grid) + 1), dtype="<u8")
        found[:, :-1] = units.astype("<u8") * self.chunk[:-1]
        return found

    def _bound(self, span: range) -> np.ndarray:
        """The key after a node's last child: the next chunk's, or past the last chunk (its
        offsets plus the chunk's, as the library closes its rightmost node)."""
        after: np.ndarray = self.offsets([min(span.stop, self.count - 1)])[0]
        return after if span.stop < self.count else after + self.chunk

    def internal(self, level: int, number: int) -> bytes:
        """A node above the leaves: its children's first keys and addresses, sizes 0."""
        children = range(number * NODE_ENTRIES, min(self.counts[level - 1], (number + 1) * NODE_ENTRIES))
        firsts = [self.span(level - 1, child).start for child in children]
        addresses = [self.node_at(level - 1, child) for child in children]
        return self._node(level, number, self.offsets(firsts), np.zeros(len(firsts), "<u4"), addresses)

    def leaf(self, number: int, sizes: Sequence[int], addresses: Sequence[int]) -> bytes:
        """Leaf `number`: a chunk's stored size and address per chunk it spans, in order."""
        return self._node(0, number, self.offsets(self.span(0, number)), np.asarray(sizes, "<u4"), addresses)

    def leaves(self, first: int, stop: int, sizes: np.ndarray, addresses: np.ndarray) -> list[bytes]:
        """Leaves [first, stop), as `leaf` makes each, made together: `sizes` and `addresses`
        are those of the chunks they span, in order. (A walk of the index of 10^6 chunks reads
        15,625 leaves: made one by one, their making alone would take most of a second.)"""
        full = min(stop, self.count // NODE_ENTRIES)  # (a last leaf short of entries: `leaf`)
        made: list[bytes] = []
        if full > first:
            made = self._full_leaves(first, full, sizes[: (full - first) * NODE_ENTRIES],
                                     addresses[: (full - first) * NODE_ENTRIES])
        if stop > full:
            rest = (full - first) * NODE_ENTRIES
            made.append(self.leaf(full, sizes[rest:].tolist(), addresses[rest:].tolist()))
        return made

    def _full_leaves(self, first: int, stop: int, sizes: np.ndarray, addresses: np.ndarray) -> list[bytes]:
        count = stop - first
        entry = np.dtype([("key", self.key), ("child", "<u8")])
        node = np.dtype([("head", "S4"), ("kind", "u1"), ("level", "u1"), ("used", "<u2"), ("left", "<u8"),
                         ("right", "<u8"), ("entries", entry, (NODE_ENTRIES,)), ("last", self.key),
                         ("rest", "V", self.node_size - _NODE_PREFIX - NODE_ENTRIES * entry.itemsize
                          - self.key.itemsize)])
        nodes = np.zeros(count, dtype=node)
        nodes["head"], nodes["kind"], nodes["used"] = b"TREE", 1, NODE_ENTRIES
        numbers = np.arange(first, stop, dtype=np.int64)
        places = (self.at + (self.firsts[0] + numbers) * self.node_size).astype("<u8")
        nowhere, step = np.uint64(UNDEFINED), np.uint64(self.node_size)
        nodes["left"] = np.where(numbers > 0, places - step, nowhere)
        nodes["right"] = np.where(numbers + 1 < self.counts[0], places + step, nowhere)
        chunks = np.arange(first * NODE_ENTRIES, stop * NODE_ENTRIES, dtype=np.int64)
        entries = nodes["entries"]
        entries["key"]["size"] = np.asarray(sizes, "<u4").reshape(count, NODE_ENTRIES)
        entries["key"]["offsets"] = self.offsets(chunks).reshape(count, NODE_ENTRIES, -1)
        entries["child"] = np.asarray(addresses, "<u8").reshape(count, NODE_ENTRIES)
        after = np.minimum((numbers + 1) * NODE_ENTRIES, self.count - 1)
        nodes["last"]["offsets"] = self.offsets(after)
        if stop * NODE_ENTRIES >= self.count:  # (the tree's last leaf: past the last chunk)
            nodes["last"]["offsets"][-1] += self.chunk
        data = nodes.tobytes()
        return [data[i * self.node_size:(i + 1) * self.node_size] for i in range(count)]

    def _node(self, level: int, number: int, offsets: np.ndarray, sizes: np.ndarray,
              addresses: Sequence[int]) -> bytes:
        used = len(addresses)
        left = self.node_at(level, number - 1) if number else UNDEFINED
        right = self.node_at(level, number + 1) if number + 1 < self.counts[level] else UNDEFINED
        entries = np.zeros(used, dtype=[("key", self.key), ("child", "<u8")])
        entries["key"]["size"], entries["key"]["offsets"] = sizes, offsets
        entries["child"] = addresses
        last = np.zeros(1, dtype=self.key)
        last["offsets"] = self._bound(self.span(level, number))
        head = b"TREE" + bytes([1, level]) + struct.pack("<HQQ", used, left, right)
        body = head + entries.tobytes() + last.tobytes()
        return body + bytes(self.node_size - len(body))
