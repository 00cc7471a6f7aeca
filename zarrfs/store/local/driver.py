"""The driver of local files: plain system calls inside the root the store may not leave
(`confined`), a generation from each file's status, atomic replacement and compare-and-swap
between processes (`files`), and directory operations for whole nodes. Local failures are not
transient and a system call cannot be abandoned: no round trips, so no deadline and one attempt.
What only local files do (files lent, reads from the page cache...) is the store's facet
(`facet.StoreFiles`)."""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Sequence

import fsspec

from .. import deadline
from ..capabilities import Capabilities
from ..driver import AnyGeneration, Driver, Expect, Operation
from ..facets import Keyed, LocalFiles
from ..settings import SourceOptions
from ..targets import REFERENCES_ALLOW
from ..values import Payload, Versioned
from . import files, scans
from .confined import Root
from .facet import StoreFiles


class LocalDriver(Driver):
    capabilities = Capabilities(round_trips=False, local_files=True, conditional=True)

    def __init__(self, fs: fsspec.AbstractFileSystem, root: str, settings: SourceOptions) -> None:
        """Links lead only inside `root`, or where else `-o references_allow=` says."""
        super().__init__(fs)
        self.confined = Root(root.rstrip("/"), settings.given[REFERENCES_ALLOW])

    @property
    def errors(self) -> tuple[deadline.Errors, deadline.Errors]:
        return deadline.error_kinds(False)

    def local_files(self, store: Keyed) -> LocalFiles:
        return StoreFiles(self.confined, store)

    # Plain system calls: fsspec's buffered file objects cost as much as decoding.
    def read(self, seconds: float | None, path: str, start: int | None, length: int | None) -> Versioned:
        return files.read(self.confined, path, start, length)

    def describe(self, seconds: float | None, path: str) -> tuple[int, str | None]:
        return self.confined.describe(path)

    def find(self, seconds: float | None, base: str) -> list[str]:
        return scans.walk(self.confined, base)

    def directories(self, seconds: float | None, base: str) -> tuple[str, ...]:
        return scans.directories(self.confined, base)

    def put(self, path: str, data: Payload, sync_directory: bool, expect: Expect) -> Operation:
        root = self.confined
        if isinstance(expect, AnyGeneration):
            return lambda s: files.write_atomically(root, path, data, sync_directory)
        wanted: str | None = expect
        return lambda s: files.replace_if(root, path, data, sync_directory, wanted)

    def delete(self, path: str, expect: Expect) -> Operation:
        root = self.confined
        if isinstance(expect, AnyGeneration):
            return lambda s: files.delete(root, path)
        wanted: str | None = expect
        return lambda s: files.delete_if(root, path, wanted)

    def sync(self, paths: Sequence[str], root: str) -> list[tuple[str, Operation]]:
        """fsync the directories of `paths` (puts made without `sync_directory`)."""
        return [(directory, functools.partial(_fsync, directory))
                for directory in sorted({os.path.dirname(path) for path in paths})]

    # Whole nodes: one directory operation, never through a link leading outside.
    def delete_tree(self, path: str) -> Operation | None:
        return lambda s: self._remove_tree(path)

    def move_tree(self, old: str, new: str) -> Operation | None:
        return lambda s: self._move(old, new)

    def _move(self, old: str, new: str) -> int:
        files.move(self.confined, old, new)  # (a link at `old` moves itself)
        return 1

    def _remove_tree(self, path: str) -> int:
        with contextlib.suppress(FileNotFoundError):  # (nothing there: nothing deleted)
            return files.remove_tree(self.confined, path)
        return 0


def _fsync(directory: str, seconds: float | None) -> bool:
    return files.fsync_directory(directory)
