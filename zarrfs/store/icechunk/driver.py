"""The driver of Icechunk repositories: each read comes with the snapshot its key last
changed in (`reads_generations`), and, mounted with -o rw at a branch, writes are made in a
session that a sync commits (`commits`): a put, a delete or a commit checked against `expect`
fails with ConflictError when another writer's commit displaced it."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from ..driver import ANY, Driver, Expect, Operation, _Any, joined
from ..values import Payload, Versioned


class IcechunkDriver(Driver):
    reads_generations = True

    @property
    def commits(self) -> bool:
        return bool(getattr(self.fs, "commits_on_sync", False))

    @property
    def conditional(self) -> bool:  # type: ignore[override]
        return self.commits

    def read(self, seconds: float | None, path: str, start: int | None, length: int | None) -> Versioned:
        return self.call(seconds, "cat_versioned", path, start, length)  # type: ignore[no-any-return]

    def put(self, path: str, data: Payload, sync_directory: bool, expect: Expect) -> Operation:
        if not self.commits:
            return super().put(path, data, sync_directory, expect)
        return functools.partial(self._on_branch, "put_if", path, expect, data=joined(data),
                                 commit=sync_directory)

    def delete(self, path: str, expect: Expect) -> Operation:
        if not self.commits:
            return super().delete(path, expect)
        return functools.partial(self._on_branch, "delete_if", path, expect)

    def sync(self, paths: Sequence[str], root: str) -> list[tuple[str, Operation]]:
        if not self.commits or not paths:  # (nothing asked for: a group commit is not waited for)
            return []
        return [(root, functools.partial(self._on_branch, "commit", list(paths), ANY))]

    def delete_tree(self, path: str) -> Operation | None:  # (the node's tree deleted in the session)
        return (lambda s: self.call(s, "remove_prefix", path)) if self.commits else None

    def move_tree(self, old: str, new: str) -> Operation | None:  # (copied and deleted in the session)
        return (lambda s: self.call(s, "move_prefix", old, new)) if self.commits else None

    def _on_branch(self, method: str, path: Any, expect: Expect, seconds: float | None, **kw: Any) -> Any:
        checked = not isinstance(expect, _Any)
        return self.call(seconds, method, path, expect if checked else None, check=checked, **kw)

