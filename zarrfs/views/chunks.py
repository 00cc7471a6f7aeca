"""The names under an array's `chunks/` directory: one file per chunk of the grid, named by
the array's own chunk key. Keys with the "/" separator become nested directories. Listings are
generated lazily: a grid may hold millions of chunks."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ..formats import ChunkKeyEncoding, is_index_text
from ..grid import Index, unravel


class ChunkNames:
    def __init__(self, encoding: ChunkKeyEncoding, grid: Index) -> None:
        self.encoding = encoding
        self.grid = grid
        self.rank = len(grid)
        # Keys split into path parts when the separator is "/": literal parts come first
        # ("c" for the default encoding), then one part per dimension.
        self.nested = encoding.separator == "/"
        self.literals: tuple[str, ...] = ("c",) if encoding.name == "default" else ()
        if self.rank == 0:
            self.literals = (encoding.key(()),)

    def resolve(self, parts: tuple[str, ...]) -> tuple[str, Index | None] | None:
        """What the path `parts` below chunks/ names: ("dir", None), ("file", chunk index),
        or None when it names nothing."""
        if not parts:
            return "dir", None
        if not self.nested:
            if len(parts) != 1:
                return None
            index = self.encoding.parse(parts[0], self.rank)
            return None if index is None or not self._in_grid(index) else ("file", index)
        depth = len(self.literals)
        if parts[:depth] != self.literals[: len(parts)]:
            return None
        if len(parts) < depth:
            return "dir", None
        numbers = parts[depth:]
        if len(numbers) > self.rank or not all(is_index_text(p) for p in numbers):
            return None
        index = tuple(int(p) for p in numbers)
        if any(i >= g for i, g in zip(index, self.grid, strict=False)):
            return None
        return ("file", index) if len(index) == self.rank else ("dir", None)

    def _in_grid(self, index: Index) -> bool:
        return all(0 <= i < g for i, g in zip(index, self.grid, strict=True))

    def names(self, parts: tuple[str, ...]) -> Sequence[str]:
        """The entries of the directory `parts` below chunks/."""
        if not self.nested:
            return _FlatKeys(self.encoding, self.grid) if not parts else []
        depth = len(self.literals)
        if len(parts) < depth:
            return [self.literals[len(parts)]]
        return _Numbers(self.grid[len(parts) - depth])


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
