"""What a mount's rechecks compare an array's metadata document with (close-to-open): the
generation of the document the array shown was made from.

An array is made from the metadata read when its group was listed or its name looked up,
which may be long before its first open. Its baseline is the generation that read saw, so a
change another writer made in between shows at the first open, as one made after it does
(`Tree.recheck`). Where the document was not read alone (consolidated metadata, a store that
reports no generations), the baseline is taken at the first open."""

from __future__ import annotations

import threading
from collections.abc import Iterable

from ..formats.nodes import join_path
from ..store import Store

Generation = str | None


class MetadataGenerations:
    """The generations arrays' metadata documents were read at, and each opened array's baseline."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._read_at: dict[str, str] = {}  # a document's key -> the generation it was read at
        self._baselines: dict[str, Generation] = {}  # an opened array's path -> its baseline
        self._documents: dict[str, Generation] = {}  # a group document's key -> what is shown

    def get(self, key: str) -> bytes | None:
        """A document's bytes (None: not stored), as `Store.get` reads them, noting the
        generation they were read at: discovery reads through this."""
        if not self._store.capabilities.versioned:  # (no generation comes with a read)
            return self._store.get(key)
        found = self._store.read(key)
        if found is None:
            return None
        if found.generation is not None:
            with self._lock:
                self._read_at[key] = found.generation
        return bytes(found.data)

    def opened(self, path: str, document: str) -> None:
        """The array at `path` was first opened, made from its metadata `document` as last
        read through `get` (or, where it was not, as stored now)."""
        key = join_path(path, document)
        with self._lock:
            if path in self._baselines:
                return
            read_at: Generation = self._read_at.pop(key, None)
        if read_at is None:  # (a request: not under the lock)
            read_at = self._store.generation(key)
        with self._lock:
            self._baselines.setdefault(path, read_at)

    def changed(self, path: str, document: str) -> bool:
        """Whether the array's metadata `document` changed since its baseline (which becomes
        what is stored now): one request, never retried."""
        generation = self._store.without_retries().generation(join_path(path, document))
        with self._lock:
            if self._baselines.get(path) == generation:
                return False
            self._baselines[path] = generation
        return True

    def document_changed(self, key: str, shown: bytes | None) -> bool:
        """Whether a group's document changed since the bytes shown of it were read: one
        request, never retried. Its generation against the one those bytes were read at; where
        that is not known (the root, read at mount; a store without generations), the stored
        bytes against `shown`."""
        with self._lock:
            baseline = self._documents.get(key, self._read_at.get(key))
        store = self._store.without_retries()
        if baseline is not None:
            generation = store.generation(key)
            changed = generation != baseline
        else:
            found = store.read(key)
            generation = None if found is None else found.generation
            changed = (None if found is None else bytes(found.data)) != shown
        with self._lock:
            self._documents[key] = generation
        return changed

    def written(self, path: str, document: str) -> None:
        """This mount wrote the array's metadata `document` (a resize): what it shows is what
        is stored now."""
        generation = self._store.generation(join_path(path, document))
        with self._lock:
            self._baselines[path] = generation

    def forget(self, paths: Iterable[str]) -> None:
        """Nodes deleted or moved: what was noted of them and of their documents."""
        gone = set(paths)
        with self._lock:
            for path in gone:
                self._baselines.pop(path, None)
            for known in (self._read_at, self._documents):
                for key in [k for k in known if k.rpartition("/")[0] in gone]:
                    del known[key]
