"""What the store layer reads and writes: a payload, a read's buffer, and bytes with the
generation they were read at (a leaf module every backend shares)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from google_crc32c import value as crc32c

# The names of the temporary files atomic puts write beside their object (local files; chunk
# keys never start with a dot): a listing of any store leaves them out (a directory copied
# elsewhere mid-write may hold them).
TEMP_PREFIX = ".zarrfs-tmp-"

# What a put writes: bytes, or pieces written one after the other (a shard is written from its
# encoded inner chunks as they are, not joined into a copy first).
Payload = bytes | bytearray | memoryview | Sequence[bytes | bytearray | memoryview]

# What a stat of a key says: the object's size and generation, or None where it is not stored.
Described = tuple[int, str | None] | None


def pieces(data: Payload) -> Sequence[bytes | bytearray | memoryview]:
    """A payload as the pieces written one after the other."""
    return [data] if isinstance(data, bytes | bytearray | memoryview) else data


# What a read gives: bytes, or a read-only view of a buffer another library filled (obstore's
# GETs: copying a 6 MB shard into bytes cost the S3 read a tenth of its CPU, on the event loop's
# thread). A view keeps its whole buffer alive: take `bytes(...)` of a piece kept for long.
Buffer = bytes | memoryview


def as_bytes(data: Buffer) -> bytes:
    """What a read gave, as bytes of its own (copied only when a view)."""
    return data if isinstance(data, bytes) else bytes(data)


@dataclass(frozen=True)
class Opened:
    """A file opened for another process to read whole (its descriptor, which the taker
    closes), its size and generation as opened; or the object's bytes lying in a file at
    `offset` (a disk cache's entry), which a reader takes only if they have the CRC-32C
    `crc32c`: a file damaged or torn since it was opened is never served (`read_opened`)."""

    fd: int
    size: int
    generation: str
    offset: int = 0
    crc32c: int | None = None


def read_opened(fd: int, size: int, offset: int = 0, crc: int | None = None,
                into: memoryview | None = None) -> memoryview | None:
    """The `size` bytes at `offset` of the file `fd` (an `Opened`'s), into `into` (at least
    `size` bytes) or a buffer of their own: fewer where the file is shorter (its decoder
    says so); None when `crc` is given and they do not have it."""
    view = memoryview(bytearray(size)) if into is None else into[:size]
    done = 0
    while done < size and (got := os.preadv(fd, [view[done:]], offset + done)):
        done += got
    if crc is not None and (done != size or crc32c(np.frombuffer(view, np.uint8)) != crc):
        return None
    return view[:done]


class Versioned(NamedTuple):
    """Bytes read from the store and the generation of the object they came from (None when
    the store cannot tell)."""

    data: Buffer
    generation: str | None


def info_generation(info: Mapping[str, Any]) -> str:
    """A generation from what `info` or a listing says of an object (GCS's `generation`
    first: its reads and conditional writes speak generations, not etags)."""
    tag = info.get("generation") or info.get("ETag") or info.get("etag") or info.get("md5Hash")
    if tag:
        return str(tag)
    return f"{info.get('size')}-{info.get('mtime') or info.get('LastModified') or info.get('created')}"
