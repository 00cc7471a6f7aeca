"""The byte ranges a read of one object may ask for (a leaf module: `core.Store.get` takes
them, and the stores built over another store's objects, `zipped`, make them)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ByteRange:
    """Bytes [start, start + length) of an object; fewer come back past its end."""

    start: int
    length: int


@dataclass(frozen=True)
class SuffixRange:
    """The last `length` bytes of an object."""

    length: int
