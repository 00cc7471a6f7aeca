"""The virtual files of a mounted array: byte ranges in a file <-> regions of the array.

Nothing here knows FUSE. A `Namespace` names the nodes (directories and files) and a file
node has a `FileView` that reads and writes bytes. Views depend only on the `RegionArray`
protocol, so they can be tested against a plain numpy array.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from .dtypes import DataType
from .errors import ZarrfsError
from .grid import Box, Index, cells_of, flat_boxes, ravel, unravel
from .metadata import ChunkKeyEncoding, is_index_text


class FileTooLargeError(ZarrfsError, OSError):
    """A write starts at or past the end of a file whose size is fixed (EFBIG)."""


class RegionArray(Protocol):
    """What a view needs of an array (zarrfs.array.ZarrArray provides it)."""

    data_type: DataType
    shape: Index
    chunk_shape: Index
    grid_shape: Index
    raw_metadata: bytes

    @property
    def read_only(self) -> bool: ...

    def read(self, box: Box) -> np.ndarray: ...
    def write(self, box: Box, values: np.ndarray) -> None: ...
    def prefetch(self, box: Box) -> None: ...
    def chunk_key(self, chunk: Sequence[int]) -> str: ...


# -- file views -------------------------------------------------------------------------------


class FileView(Protocol):
    @property
    def size(self) -> int: ...

    @property
    def writable(self) -> bool: ...

    def read(self, offset: int, size: int) -> bytes | memoryview: ...
    def write(self, offset: int, data: bytes | memoryview) -> int: ...


@dataclass(frozen=True)
class BytesFile:
    """A read-only file with fixed contents (zarr.json)."""

    contents: bytes
    writable: bool = False

    @property
    def size(self) -> int:
        return len(self.contents)

    def read(self, offset: int, size: int) -> bytes:
        return self.contents[offset : offset + size]

    def write(self, offset: int, data: bytes | memoryview) -> int:
        raise PermissionError("read-only file")


class RegionFile:
    """A hyperrectangle of the array as a flat C-order file in a chosen byte order.

    `data` is the whole array; a chunk file is the region of one chunk of the grid (edge
    chunks include their overhang, which holds the fill value)."""

    def __init__(self, array: RegionArray, region: Box, byteorder: str = "little") -> None:
        self.array = array
        self.region = region
        self.itemsize = array.data_type.itemsize
        self.size = region.size * self.itemsize
        self.writable = not array.read_only
        storage = array.data_type.storage
        self.file_dtype = storage.newbyteorder("<" if byteorder == "little" else ">")
        self._convert = self.itemsize > 1 and not self.file_dtype.isnative

    def boxes(self, offset: int, size: int) -> list[Box]:
        """The array regions holding bytes [offset, offset + size) of the file, in order."""
        first = offset // self.itemsize
        last = -(-min(offset + size, self.size) // self.itemsize)
        origin = self.region.start
        return [
            Box(_shift(b.start, origin), _shift(b.stop, origin))
            for b in flat_boxes(self.region.shape, first, last)
        ]

    def read(self, offset: int, size: int) -> bytes | memoryview:
        size = max(0, min(size, self.size - offset))
        if size == 0:
            return b""
        boxes = self.boxes(offset, size)
        parts = [self._to_file_order(self.array.read(box)) for box in boxes]
        skip = offset % self.itemsize
        # As bytes: some element types (bfloat16) export no buffer format, and concatenating
        # non-native arrays would swap them back to native order.
        raw = [p.reshape(-1).view(np.uint8) for p in parts]
        joined = raw[0] if len(raw) == 1 else np.concatenate(raw)
        return joined.data[skip : skip + size]

    def write(self, offset: int, data: bytes | memoryview) -> int:
        if offset >= self.size and len(data):
            raise FileTooLargeError(f"write at {offset} is past the end of a {self.size}-byte file")
        data = memoryview(data).cast("B")[: self.size - offset]
        if not data:
            return 0
        first = offset - offset % self.itemsize
        end = offset + len(data)
        last = min(end + (-end) % self.itemsize, self.size)
        if first != offset or last != end:
            # Partial elements at either end: merge the new bytes into the current ones.
            merged = bytearray(self.read(first, last - first))
            merged[offset - first : offset - first + len(data)] = data
            data = memoryview(merged)
        values = self._from_file_order(np.frombuffer(data, dtype=self.file_dtype))
        position = 0
        for box in self.boxes(first, last - first):
            count = box.size
            self.array.write(box, values[position : position + count].reshape(box.shape))
            position += count
        return end - offset

    def prefetch(self, offset: int, size: int) -> None:
        size = max(0, min(size, self.size - offset))
        for box in self.boxes(offset, size):
            self.array.prefetch(box)

    def chunks_touched(self, offset: int, size: int) -> set[Index]:
        """The chunk-grid cells whose contents bytes [offset, offset + size) belong to."""
        return {
            piece.cell
            for box in self.boxes(offset, size)
            for piece in cells_of(box, self.array.chunk_shape)
        }

    def _to_file_order(self, values: np.ndarray) -> np.ndarray:
        if self._convert:
            return values.astype(self.file_dtype)
        return np.ascontiguousarray(values)

    def _from_file_order(self, values: np.ndarray) -> np.ndarray:
        kind = self.array.data_type.name
        if kind == "bool":
            nonzero: np.ndarray = values.view(np.uint8) != 0
            return nonzero
        if kind == "int4":
            return ((values.view(np.uint8) & 0x0F) ^ 8).astype(np.int8) - np.int8(8)
        converted: np.ndarray = values.astype(self.array.data_type.storage, copy=False)
        return converted


def _shift(index: Index, origin: Index) -> Index:
    return tuple(i + o for i, o in zip(index, origin, strict=True))


# -- the namespace ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Node:
    """A directory or file of the mount; subclasses are hashable identities for inodes."""


@dataclass(frozen=True)
class RootDir(Node):
    pass


@dataclass(frozen=True)
class MetadataFileNode(Node):
    pass


@dataclass(frozen=True)
class DataFileNode(Node):
    pass


@dataclass(frozen=True)
class ChunkDir(Node):
    """A directory under chunks/, named by the key parts leading to it ("" parts for chunks/)."""

    parts: tuple[str, ...] = ()


@dataclass(frozen=True)
class ChunkFileNode(Node):
    index: Index


METADATA_NAME = "zarr.json"
DATA_NAME = "data"
CHUNKS_NAME = "chunks"


class Namespace:
    """The tree of one mounted array: zarr.json, data and chunks/<chunk key>."""

    def __init__(self, array: RegionArray, encoding: ChunkKeyEncoding, byteorder: str) -> None:
        self.array = array
        self.encoding = encoding
        self.byteorder = byteorder
        self.rank = len(array.shape)
        self.grid = array.grid_shape
        # Keys split into path parts when the separator is "/": literal parts come first
        # ("c" for the default encoding), then one part per dimension.
        self.nested = encoding.separator == "/"
        self.literals: tuple[str, ...] = ("c",) if encoding.name == "default" else ()
        if self.rank == 0:
            self.literals = (encoding.key(()),)
        self._data = RegionFile(array, Box((0,) * self.rank, array.shape), byteorder)
        # Directories below chunks/ at numeric depth k (1 <= k < rank) are numbered after
        # _DIR_BASE, depth by depth; chunk files after all of them.
        self._dir_offsets = [0, 0]
        if self.nested:
            for depth in range(1, self.rank):
                self._dir_offsets.append(self._dir_offsets[-1] + math.prod(self.grid[:depth]))
        self._file_base = _DIR_BASE + self._dir_offsets[-1]

    # -- lookups ---------------------------------------------------------------------------

    def lookup(self, parent: Node, name: str) -> Node | None:
        if isinstance(parent, RootDir):
            return {
                METADATA_NAME: MetadataFileNode(),
                DATA_NAME: DataFileNode(),
                CHUNKS_NAME: ChunkDir(),
            }.get(name)
        if isinstance(parent, ChunkDir):
            return self._chunk_node((*parent.parts, name))
        return None

    def _chunk_node(self, parts: tuple[str, ...]) -> Node | None:
        if not self.nested:
            if len(parts) != 1:
                return None
            index = self.encoding.parse(parts[0], self.rank)
            return None if index is None or not self._in_grid(index) else ChunkFileNode(index)
        depth = len(self.literals)
        if parts[:depth] != self.literals[: len(parts)]:
            return None
        if len(parts) < depth:
            return ChunkDir(parts)
        numbers = parts[depth:]
        if len(numbers) > self.rank or not all(_is_index(p) for p in numbers):
            return None
        index = tuple(int(p) for p in numbers)
        if any(i >= g for i, g in zip(index, self.grid, strict=False)):
            return None
        if len(index) == self.rank:
            return ChunkFileNode(index)
        return ChunkDir(parts)

    def _in_grid(self, index: Index) -> bool:
        return all(0 <= i < g for i, g in zip(index, self.grid, strict=True))

    # -- listings --------------------------------------------------------------------------

    def is_dir(self, node: Node) -> bool:
        return isinstance(node, RootDir | ChunkDir)

    def entry_count(self, directory: Node) -> int:
        """How many entries a directory has (for link counts and st_size)."""
        if isinstance(directory, RootDir):
            return 3
        assert isinstance(directory, ChunkDir)
        names = self._level_names(directory.parts)
        return len(names)

    def listdir(self, directory: Node, start: int = 0) -> Iterator[tuple[str, Node]]:
        """Entries from position `start` on, generated lazily (a grid may hold millions)."""
        if isinstance(directory, RootDir):
            entries = [(METADATA_NAME, MetadataFileNode()), (DATA_NAME, DataFileNode()),
                       (CHUNKS_NAME, ChunkDir())]
            yield from entries[start:]
            return
        assert isinstance(directory, ChunkDir)
        names = self._level_names(directory.parts)
        for position in range(start, len(names)):
            name = names[position]
            node = self._chunk_node((*directory.parts, name))
            assert node is not None
            yield name, node

    def _level_names(self, parts: tuple[str, ...]) -> Sequence[str]:
        if not self.nested:
            return _FlatKeys(self.encoding, self.grid)
        depth = len(self.literals)
        if len(parts) < depth:
            return [self.literals[len(parts)]]
        return _Numbers(self.grid[len(parts) - depth])

    # -- files -----------------------------------------------------------------------------

    def file(self, node: Node) -> FileView:
        if isinstance(node, MetadataFileNode):
            return BytesFile(self.array.raw_metadata)
        if isinstance(node, DataFileNode):
            return self._data
        if isinstance(node, ChunkFileNode):
            start = tuple(i * c for i, c in zip(node.index, self.array.chunk_shape, strict=True))
            stop = tuple(s + c for s, c in zip(start, self.array.chunk_shape, strict=True))
            return RegionFile(self.array, Box(start, stop), self.byteorder)
        raise IsADirectoryError(str(node))

    def total_bytes(self) -> int:
        return self._data.size

    # -- stable numbers for nodes (inode numbers), computed, never stored -------------------

    def node_id(self, node: Node) -> int:
        if isinstance(node, RootDir | MetadataFileNode | DataFileNode):
            return _FIXED_IDS[type(node)]
        if isinstance(node, ChunkFileNode):
            return self._file_base + ravel(node.index, self.grid)
        assert isinstance(node, ChunkDir)
        numbers = node.parts[len(self.literals) :] if len(node.parts) >= len(self.literals) else None
        if not node.parts:
            return _CHUNKS_ID
        if not numbers:
            return _LITERAL_DIR_ID
        depth = len(numbers)
        return _DIR_BASE + self._dir_offsets[depth] + ravel(tuple(map(int, numbers)), self.grid[:depth])

    def node_for_id(self, node_id: int) -> Node | None:
        fixed = {v: k for k, v in _FIXED_IDS.items()}
        if node_id in fixed:
            return fixed[node_id]()
        if node_id == _CHUNKS_ID:
            return ChunkDir()
        if node_id == _LITERAL_DIR_ID and self.nested and self.rank > 0 and self.literals:
            return ChunkDir(self.literals)
        if node_id >= self._file_base:
            position = node_id - self._file_base
            if position >= math.prod(self.grid):
                return None
            return ChunkFileNode(unravel(position, self.grid))
        relative = node_id - _DIR_BASE
        for depth in range(len(self._dir_offsets) - 1, 0, -1):
            if relative >= self._dir_offsets[depth]:
                numbers = unravel(relative - self._dir_offsets[depth], self.grid[:depth])
                return ChunkDir(self.literals + tuple(map(str, numbers)))
        return None


class _Numbers(Sequence[str]):
    """The names "0" .. str(count - 1), without building the list."""

    def __init__(self, length: int) -> None:
        self.length = length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, position: Any) -> Any:
        return str(range(self.length)[position])


class _FlatKeys(Sequence[str]):
    """Every chunk key of a grid in C order, without building the list."""

    def __init__(self, encoding: ChunkKeyEncoding, grid: Index) -> None:
        self.encoding = encoding
        self.grid = grid
        self.length = math.prod(grid)

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, position: Any) -> Any:
        return self.encoding.key(unravel(range(self.length)[position], self.grid))


_FIXED_IDS: dict[type[Node], int] = {RootDir: 1, MetadataFileNode: 2, DataFileNode: 3}
_CHUNKS_ID = 4
_LITERAL_DIR_ID = 5
_DIR_BASE = 8


def _is_index(part: str) -> bool:
    return is_index_text(part)
