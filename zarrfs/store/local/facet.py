"""What only a store of local files does (`facets.LocalFiles`), for one store below the
confined root of its driver: files lent to the decoding processes, reads from the page cache
alone, scans of its directories, swaps of two of them, and their space and leftovers."""

from __future__ import annotations

import os
from collections.abc import Sequence

from ..facets import Keyed
from ..observe import GET, LIST, PUT
from ..values import Described, Opened
from . import files, scans
from .confined import Root, opened


class StoreFiles:
    """The local files of `store`, opened within `confined` (its driver's)."""

    def __init__(self, confined: Root, store: Keyed) -> None:
        self.confined = confined
        self.store = store

    def writable(self) -> bool:
        return files.writable(self.store.root)

    # Plain system calls, with no hop through the store's deadline: these must stay as cheap
    # as a read of the page cache (a chunk a call).
    def read_cached(self, key: str, start: int, into: memoryview) -> str | None:
        return files.read_cached(self.confined, self.store.path(key), start, into)

    def read_whole_cached(self, key: str, into: memoryview) -> tuple[int, str | None] | None:
        return files.read_whole_cached(self.confined, self.store.path(key), into)

    def read_edge_cached(self, key: str, into: memoryview, *, at_end: bool) -> tuple[int, str] | None:
        return files.read_edge_cached(self.confined, self.store.path(key), into, at_end=at_end)

    def opened(self, key: str) -> Opened | None:
        path = self.store.path(key)
        return self.store.call(key, lambda s: opened(self.confined, path), kind=GET)

    def lend_directory(self) -> int | None:
        return self.confined.lent(self.store.root)

    def scanned(self, keys: Sequence[str]) -> dict[str, Described]:
        root = self.store.root
        found = self.store.call("", lambda s: scans.scanned(root, keys, self.confined), kind=LIST)
        return dict(found or {})

    def exchange(self, first: str, second: str) -> bool:
        paths = self.store.path(first), self.store.path(second)
        return bool(self.store.call(second, lambda s: files.exchange(self.confined, *paths),
                                    missing_ok=False, kind=PUT))

    def room(self) -> os.statvfs_result:
        return os.statvfs(self.store.root)

    def remove_stale_temporaries(self) -> int:
        return 0 if self.store.read_only else files.remove_stale_temporaries(self.store.root)
