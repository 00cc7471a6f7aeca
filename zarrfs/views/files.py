"""The files of a mounted array, as the fuse layer sees them: the `FileView` contract, the
array a view reads (`RegionArray`, and `StoredArray` for views of its stored chunks), how the
mount's files hold it (`FileForm`), the files of bytes made once, and the errors of files.
The file over the array's regions (`data`, chunk files) is `region_file.RegionFile`.

Nothing here knows FUSE. Each `FileView` reads and writes bytes and declares what the fuse
layer needs to know of it (page cache or direct I/O, sequential prefetch). Views depend only
on the `RegionArray` protocol, so they can be tested against a plain numpy array.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ..array import Reading
from ..codecs import BytesLike
from ..codecs.stored_form import StoredForm
from ..declared import OptionValues
from ..errors import ZarrfsError
from ..formats import DataType
from ..grid import Box, Index

if TYPE_CHECKING:
    from ..array import Stream


class FixedBytesError(ZarrfsError, PermissionError):
    """A write that would change bytes no write may change (a header) or a file's fixed
    size (EPERM)."""


class FileTooLargeError(ZarrfsError, OSError):
    """A write starts at or past the end of a file whose size is fixed (EFBIG)."""


class CannotHold(ValueError):
    """A header view's format cannot hold this array (its element type, rank or a size): the
    maker raises it saying why, the array directory logs that and shows no file."""


class RegionArray(Protocol):
    """What a view needs of an array (zarrfs.array.ZarrArray provides it)."""

    data_type: DataType

    @property
    def shape(self) -> Index: ...

    @property
    def chunk_shape(self) -> Index: ...

    @property
    def read_only(self) -> bool: ...

    @property
    def read_chunk_shape(self) -> Index:
        """The unit read and cached (the inner chunk of a shard)."""

    def read_boxes(self, boxes: Sequence[Box]) -> list[np.ndarray]:
        """Each box's elements, from one version of every chunk they touch."""

    def cached(self, boxes: Sequence[Box]) -> bool:
        """Whether the cache holds every chunk the boxes touch whole (a read of them waits
        on nothing)."""

    def stream(self, box: Box, dtype: np.dtype[Any] | None = None) -> Stream | None:
        """A buffer being filled with the elements of `box` in C order, as `dtype` (the
        storage type in either byte order; None: as stored) (None: no room)."""

    @property
    def slab_bytes(self) -> int:
        """What the buffers `stream` fills may hold at once, all readers together."""

    def write(self, box: Box, values: np.ndarray) -> None: ...
    def resize(self, shape: tuple[int, ...]) -> None: ...
    def prefetch(self, box: Box) -> None: ...
    def flush(self) -> None: ...
    def chunk_key(self, chunk: Sequence[int]) -> str: ...


class StoredArray(RegionArray, Protocol):
    """What the view needs of an array beyond a region's elements: its stored chunks."""

    regular_read_chunks: bool  # (False: a rectilinear grid's chunks, of many shapes)

    @property
    def fetches_remotely(self) -> bool: ...

    @property
    def stored_form(self) -> StoredForm | None: ...
    @property
    def dirty_bytes(self) -> int: ...
    @property
    def changes(self) -> Hashable:
        """A value that changes whenever the elements may have (a write, or another writer's
        change found)."""
    def read_chunk_now(self, unit: Index, into: memoryview) -> int | None: ...
    def read_unit(self, unit: Index) -> np.ndarray:
        """A read chunk's elements, whole: cached, or decoded and not kept (for a reader of
        all of it in one request)."""
    def read_stored_unit(self, unit: Index) -> BytesLike | None: ...
    def stored_sizes(self, units: Sequence[Index]) -> dict[Index, int]: ...
    def stored_rows(self) -> frozenset[int] | None:
        """The rows of stored objects (one listing; None: no census: `array.stored_rows`)."""
    def stored_sizes_numbered(self, numbers: np.ndarray,
                              rows: frozenset[int] | None = None) -> dict[int, int]:
        """`stored_sizes` by read chunk number in C order, unasked for chunks outside `rows`."""
    def encoded_fill(self) -> BytesLike: ...


@dataclass(frozen=True)
class FileForm:
    """How the files made of an array's chunks (`data.tif`, `data.h5`) hold its elements,
    as the mount's options say: the byte order of what they decode, and the options each
    view family declares and reads itself (`options[ITS_OPTION]`), carried here unread."""

    byteorder: str = "little"
    options: OptionValues = field(default_factory=OptionValues)


# -- file views -------------------------------------------------------------------------------

# st_blksize: tools that honour it read this much at a time (cp, dd's peers, stdio). A file read
# at random in small pieces (tiles) says less: Python's buffered reads fill a whole block, and a
# block of 1 MiB past a tile would be the next tiles, fetched for nothing.
STREAM_BLOCK = 1 << 20
RANDOM_ACCESS_BLOCK = 4096


class FileView(Protocol):
    """A file's contents, and how the fuse layer should serve it."""

    @property
    def size(self) -> int: ...

    @property
    def writable(self) -> bool: ...

    @property
    def direct_io(self) -> bool:
        """Served without the page cache: always current, even when another view of the
        same bytes was written (chunk files)."""

    @property
    def block_size(self) -> int:
        """The read size to suggest to readers (st_blksize)."""

    def readahead(self) -> Reading | None:
        """What reads ahead (or holds bytes) for one open file, or None: read at once. Called
        in the thread that will call its `ready`."""

    def read(self, offset: int, size: int) -> bytes | memoryview: ...
    def write(self, offset: int, data: bytes | memoryview) -> int: ...
    def prefetch(self, offset: int, size: int) -> None: ...
    def flush(self) -> None: ...

    @property
    def resizable(self) -> bool: ...

    def resize(self, size: int, *, round_up: bool = False) -> None: ...


class MadeView(FileView, Protocol):
    """A file made of arrays' stored chunks (a TIFF), which keeps stored bytes it fetched."""

    def forget_fetched(self) -> None:
        """Fetch again what was fetched before (another writer may have changed it)."""


class ReadOnlyFile:
    """What every read-only view shares: its size is fixed, nothing is written, prefetched or
    flushed, and it is read at once (subclasses give `size`, `read` and `direct_io`)."""

    writable = False
    resizable = False
    block_size = STREAM_BLOCK

    def readahead(self) -> Reading | None:
        return None

    def write(self, offset: int, data: bytes | memoryview) -> int:
        raise PermissionError("read-only file")

    def resize(self, size: int, *, round_up: bool = False) -> None:
        raise FixedBytesError("the size of this file is fixed")

    def prefetch(self, offset: int, size: int) -> None:
        return None

    def flush(self) -> None:
        return None


class StoredFile(ReadOnlyFile):
    """A small read-only file whose size is known before its bytes, which are read on the
    first read (a metadata file known from consolidated metadata). direct_io: no page cache,
    so a new version (after a resize) shows at once."""

    direct_io = True

    def __init__(self, size: int, load: Callable[[], bytes]) -> None:
        self.size = size
        self._load = load

    def read(self, offset: int, size: int) -> bytes:
        return self._load()[offset : offset + size]


class BytesFile(StoredFile):
    """A read-only file of a few bytes known now (metadata files as stored, headers)."""

    def __init__(self, contents: bytes) -> None:
        super().__init__(len(contents), lambda: contents)
        self.contents = contents
