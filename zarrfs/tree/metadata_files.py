"""The metadata files of groups and arrays as files: their bytes as stored, read once (or
known already), and their sizes, asked of the store without reading them, so that listing a
group known from consolidated metadata reads nothing more."""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Mapping

from ..formats.nodes import join_path
from ..store import Store
from ..views import BytesFile, FileView
from ..views.files import StoredFile

Raw = Callable[[str], Mapping[str, bytes]]  # a node's metadata bytes known already, by name


class MetadataFiles:
    def __init__(self, store: Store, raw_of: Raw) -> None:
        self.store = store
        self._raw_of = raw_of
        self._lock = threading.Lock()
        self._bytes: dict[tuple[str, str], bytes] = {}
        self._sizes: dict[tuple[str, str], int | None] = {}

    def file(self, path: str, name: str) -> FileView:
        known = self._known(path, name)
        if known is not None:
            return BytesFile(known)
        size = self.size(path, name)
        if size is None:
            raise FileNotFoundError(join_path(path, name))
        return StoredFile(size, lambda: self.read(path, name))

    def size(self, path: str, name: str) -> int | None:
        """The stored size of a metadata file, or None when it is not stored (consolidated
        metadata lists an empty .zattrs for arrays that have none)."""
        raw = self._raw_of(path)
        if name in raw:
            return len(raw[name])
        key = (path, name)
        with self._lock:
            if key in self._sizes:
                return self._sizes[key]
        size = self.store.size(join_path(path, name))
        with self._lock:
            self._sizes[key] = size
        return size

    def stored(self, path: str, names: Collection[str]) -> list[str]:
        return [name for name in names if self.size(path, name) is not None]

    def read(self, path: str, name: str) -> bytes:
        """A metadata file as stored: read once (consolidated metadata has the documents,
        not the bytes), then kept."""
        known = self._known(path, name)
        if known is None:
            known = self.store.get(join_path(path, name)) or b""
            with self._lock:
                self._bytes[(path, name)] = known
        return known

    def _known(self, path: str, name: str) -> bytes | None:
        raw = self._raw_of(path)
        if name in raw:
            return raw[name]
        with self._lock:
            return self._bytes.get((path, name))

    def forget(self, path: str, names: Collection[str]) -> None:
        with self._lock:
            for name in names:
                self._bytes.pop((path, name), None)
                self._sizes.pop((path, name), None)

    def forget_paths(self, paths: Collection[str]) -> None:
        with self._lock:
            for cache in (self._bytes, self._sizes):
                for key in [k for k in cache if k[0] in paths]:
                    del cache[key]
