"""Which rows of an array's stored objects exist, from one listing of the directory holding
them: the chunk keys of a grid of two or more dimensions name a directory by the first index
("c/5/7": row 5's directory "c/5"; v2 with "/": "5/7"), so one listing of their parent names
every row that holds a stored chunk or shard.

A reader that looks at the stored sizes of a wide span of chunks (a walk of `data.h5`'s whole
index) then asks the store only about the rows present: a sparse array of 10^6 chunks, three
of them stored, costs the listing and three rows, not a thousand. Keys with no such directory
("c.5.7", one dimension) have no census: every row is asked about."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

import numpy as np

from ...store import Store

StoredRows = frozenset[int]


def rows_directory(chunk_key: Callable[[Sequence[int]], str], rank: int) -> str | None:
    """The directory holding the rows' directories ("c", or "" for v2's "5/7"), or None when
    the keys have none (one dimension, or a separator other than "/")."""
    if rank < 2:
        return None
    first, second = (chunk_key((row,) + (0,) * (rank - 1)) for row in (0, 1))
    row_of_first, row_of_second = os.path.dirname(first), os.path.dirname(second)
    if os.path.basename(row_of_first) != "0" or os.path.basename(row_of_second) != "1":
        return None
    parent = os.path.dirname(row_of_first)
    return parent if parent == os.path.dirname(row_of_second) else None


def stored_rows(store: Store, chunk_key: Callable[[Sequence[int]], str], rank: int) -> StoredRows | None:
    """The first indices of the rows holding a stored object, from one listing; None when
    the keys have no row directories or the store cannot list them."""
    directory = rows_directory(chunk_key, rank)
    if directory is None or not store.capabilities.lists:
        return None
    return frozenset(int(name) for name in store.list_dirs(directory) if name.isdigit())


def in_rows(object_rows: np.ndarray, rows: StoredRows) -> np.ndarray:
    """Which of `object_rows` (first indices of objects) are among `rows` (a mask)."""
    return np.isin(object_rows, np.fromiter(rows, dtype=np.int64, count=len(rows)))
