"""The values of a TIFF image's offset and byte-count tables, made when a reader reads them.

A tiled image of 10^6 tiles has tables of 16 MB; their values are never all made at once:
tiles in slots of one size have arithmetic offsets (with a gap after every run of a few, where
the layout puts one) and one byte count (`Stepped`); strips and
a few small tables are plain arrays (`Given`). Pure, but for the tables whose values are
learned from the store as they are read (`lazy`: `tile_sizes.Learned`)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np


@dataclass(frozen=True)
class TagTable:
    """`length` values, as uint64."""

    length: int

    lazy = False  # (True: values may cost the store; never made before a reader reads them)

    def __len__(self) -> int:
        return self.length

    def values(self, start: int, stop: int) -> np.ndarray:
        """Entries [start, stop)."""
        raise NotImplementedError

    def values_now(self, start: int, stop: int) -> np.ndarray | None:
        """Entries [start, stop) if they need no wait, else None."""
        return self.values(start, stop)

    def part(self, start: int, stop: int) -> TagTable:
        """The table of entries [start, stop)."""
        raise NotImplementedError

    def shifted(self, by: int) -> TagTable:
        """Every value plus `by` (offsets moved by where the data starts)."""
        raise NotImplementedError


@dataclass(frozen=True)
class Given(TagTable):
    """Values known when the file is made (strips, a few tiles)."""

    array: np.ndarray

    @classmethod
    def of(cls, values: np.ndarray) -> Given:
        array = np.asarray(values, dtype=np.uint64)
        return cls(len(array), array)

    def values(self, start: int, stop: int) -> np.ndarray:
        return self.array[start:stop]

    def part(self, start: int, stop: int) -> Given:
        return Given.of(self.array[start:stop])

    def shifted(self, by: int) -> Given:
        return Given.of(self.array + np.uint64(by))


@dataclass(frozen=True)
class Stepped(TagTable):
    """first, first + step, first + 2 step, ...: tiles in slots of one size (their offsets),
    or of one byte count (step 0); with `every`, `gap` more after each run of `every` values
    (counted from the whole table's first: `skip` values of it are before this part's)."""

    first: int
    step: int
    every: int = 0  # (0: no gaps)
    gap: int = 0
    skip: int = 0

    def values(self, start: int, stop: int) -> np.ndarray:
        numbers = np.arange(start + self.skip, stop + self.skip, dtype=np.uint64)
        found = np.uint64(self.first) + numbers * np.uint64(self.step)
        if self.every:
            found += numbers // np.uint64(self.every) * np.uint64(self.gap)
        return found

    def part(self, start: int, stop: int) -> Stepped:
        return replace(self, length=stop - start, skip=self.skip + start)

    def shifted(self, by: int) -> Stepped:
        return replace(self, first=self.first + by)
