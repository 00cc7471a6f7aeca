"""The driver of Icechunk repositories: each read comes with the snapshot its key last
changed in (`reads_generations`), its versions are shown below `.versions/` (`versions`), the
generation of each key is known from the snapshot followed (`knows_generations`), and, mounted
with -o rw at a branch, writes are made in a session that a sync commits (`commits`): a put, a
delete or a commit checked against `expect` fails with ConflictError when another writer's
commit displaced it. Its versions, and the generations known from the snapshot followed, are
its facet (`facets.VersionHistory`)."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from typing import Any

import fsspec

from ..capabilities import Capabilities
from ..driver import ANY, AnyGeneration, Driver, Expect, Operation, joined
from ..facets import VersionHistory
from ..values import Payload, Versioned

_READING = Capabilities(reads_generations=True, knows_generations=True)


class IcechunkDriver(Driver):
    def __init__(self, fs: fsspec.AbstractFileSystem) -> None:
        from .versions import VersionsFileSystem  # (icechunk is imported only once a repository is opened)

        super().__init__(fs)
        self._versions = _IcechunkHistory(self)
        self.capabilities = dataclasses.replace(_READING, versions=isinstance(fs, VersionsFileSystem))
        if fs.commits_on_sync:  # (writes started before the driver was made)
            self._writing()

    def start_writes(self, writable: bool) -> bool:
        if writable:
            self.fs.start_writes()
            self._writing()
        return writable

    def _writing(self) -> None:
        self.capabilities = dataclasses.replace(self.capabilities, conditional=True, commits=True)

    def read(self, seconds: float | None, path: str, start: int | None, length: int | None) -> Versioned:
        return self.call(seconds, "cat_versioned", path, start, length)  # type: ignore[no-any-return]

    def versions(self) -> VersionHistory:
        return self._versions

    def put(self, path: str, data: Payload, sync_directory: bool, expect: Expect) -> Operation:
        if not self.capabilities.commits:
            return super().put(path, data, sync_directory, expect)
        return functools.partial(self._on_branch, "put_if", path, expect, data=joined(data),
                                 commit=sync_directory)

    def delete(self, path: str, expect: Expect) -> Operation:
        if not self.capabilities.commits:
            return super().delete(path, expect)
        return functools.partial(self._on_branch, "delete_if", path, expect)

    def sync(self, paths: Sequence[str], root: str) -> list[tuple[str, Operation]]:
        if not self.capabilities.commits or not paths:  # (nothing asked: a group commit is not waited for)
            return []
        return [(root, functools.partial(self._on_branch, "commit", list(paths), ANY))]

    # Whole nodes, in the session: a tree deleted; copied and deleted.
    def delete_tree(self, path: str) -> Operation | None:
        return (lambda s: self.call(s, "remove_prefix", path)) if self.capabilities.commits else None

    def move_tree(self, old: str, new: str) -> Operation | None:
        return (lambda s: self.call(s, "move_prefix", old, new)) if self.capabilities.commits else None

    def _on_branch(self, method: str, path: Any, expect: Expect, seconds: float | None, **kw: Any) -> Any:
        checked = not isinstance(expect, AnyGeneration)
        return self.call(seconds, method, path, expect if checked else None, check=checked, **kw)


class _IcechunkHistory:
    """Icechunk's versions (`facets.VersionHistory`), through its driver's calls."""

    def __init__(self, driver: IcechunkDriver) -> None:
        self.driver = driver

    def names(self, seconds: float | None, kind: str) -> list[str]:
        return self.driver.call(seconds, "version_names", kind)  # type: ignore[no-any-return]

    def log(self, seconds: float | None) -> bytes:
        return self.driver.call(seconds, "version_log")  # type: ignore[no-any-return]

    def create(self, seconds: float | None, kind: str, name: str) -> None:
        self.driver.call(seconds, "create_version", kind, name)

    def known_generation(self, path: str) -> str:
        return self.driver.fs.known_generation(path)  # type: ignore[no-any-return]

    def resume(self, generations: Sequence[str]) -> None:
        self.driver.fs.resume(generations)
