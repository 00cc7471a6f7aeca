"""A driver (`driver.Driver`) under the store's deadline, retries and observer, addressed by keys
below a root: the operations each of one key or one listing, which the rest of `store/` (`core`,
`many`, `prefixes`, `versions`) builds on.

Methods are synchronous and thread-safe; the fuse layer calls them from worker threads so the
event loop never blocks on I/O. A missing key is a return value (None), never an exception;
any other failure is a `StoreError` naming the key. A put replaces the object atomically where
the driver can, so a reader never sees half a chunk.

Compare-and-swap: `put` and `delete` take `expect`, the generation the caller read (None: the
key must not exist), and raise `ConflictError` when the object is no longer that one. Drivers
whose capabilities are `conditional` honour it; on others it is ignored and concurrent writers
are not coordinated. Where the driver `commits` (Icechunk), what makes writes durable is a
commit. Every operation goes through the driver: the store holds no filesystem of its own.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

from ..errors import ConflictError, ReadOnlyError
from . import deadline
from .capabilities import Capabilities
from .deadline import RetryPolicy
from .driver import ANY, Driver, Expect
from .facets import LocalFiles
from .observe import DELETE, LIST, OTHER, PUT, STAT, SYNC, StoreObserver, observed
from .outage import Outage
from .values import TEMP_PREFIX, Payload

T = TypeVar("T")


class BaseStore:
    def __init__(self, root: str, driver: Driver, *, read_only: bool = False,
                 retry: RetryPolicy | None = None, observer: StoreObserver | None = None,
                 answers: deadline.Answers | None = None) -> None:
        """`driver`: the backend's; `answers`: when the store last answered, shared by every
        view of one store."""
        self.observer = observer  # (metrics: every operation reported to it)
        self.root = root.rstrip("/")
        self.driver = driver
        # What only a store of local files does (`facets.LocalFiles`), found once: asked for
        # on the read path of every chunk.
        self.local_files: LocalFiles | None = driver.local_files(self)
        self.read_only = read_only or (self.local_files is not None and not self.local_files.writable())
        # Local failures are not transient, and a system call cannot be abandoned: stores
        # without round trips get one attempt and no deadline. Remote ones get both.
        self.bounded = self.driver.capabilities.round_trips
        self.retry = (retry or RetryPolicy()) if self.bounded else RetryPolicy(retries=False)
        self.answers = answers or deadline.Answers()
        # Whether its users' close-to-open rechecks are answered: a front end asks, and serves
        # what it has while they are not.
        self.outage = Outage("what is cached is")

    @property
    def capabilities(self) -> Capabilities:
        """What the layers above may ask of the store: its driver's."""
        return self.driver.capabilities

    def path(self, key: str) -> str:
        return f"{self.root}/{key}" if key else self.root

    def key_of(self, path: str) -> str:
        """The key of a path of the filesystem's below this store's root."""
        path = path.rstrip("/")
        return path[len(self.root) + 1 :] if path.startswith(self.root + "/") else path

    def stat(self, key: str) -> tuple[int, str | None] | None:
        """The size and generation of `key` (None: not stored)."""
        path = self.path(key)
        return self.call(key, lambda s: self.driver.describe(s, path), kind=STAT)

    def list(self, prefix: str = "") -> Iterator[str]:
        """Keys below `prefix` (a directory-like prefix such as "c/1"), in no set order."""
        base = self.path(prefix)
        found = self.call(prefix, lambda s: self.driver.find(s, base), kind=LIST)
        for key in map(self.key_of, found or []):
            if not key.rsplit("/", 1)[-1].startswith(TEMP_PREFIX):
                yield key

    def sizes(self, prefix: str = "") -> dict[str, int]:
        """The size of every key below `prefix`, as stored now, the temporary files of atomic
        puts included (`list` leaves them out): a check of the whole store."""
        base = self.path(prefix)
        found = self.call(prefix, lambda s: self.driver.listed(s, base), kind=LIST) or {}
        return {self.key_of(path): int(info.get("size") or 0) for path, info in found.items()}

    def list_dirs(self, prefix: str = "") -> tuple[str, ...]:
        """The names of the directories (common prefixes) directly below `prefix`, now."""
        base = self.path(prefix)
        return self.call(prefix, lambda s: self.driver.directories(s, base), kind=LIST) or ()

    # -- writes ------------------------------------------------------------------------------

    def put(self, key: str, data: Payload, *, sync_directory: bool = True,
            expect: Expect = ANY) -> str | None:
        """Replace `key` atomically; its new generation (None where the store cannot tell).
        A local put is durable when it returns, unless `sync_directory` is False: then
        `sync_directories` must follow (a batch of puts to one directory then costs one
        directory fsync, not one each). ConflictError when `expect` no longer holds."""
        self.check_writable(key)
        put = self.driver.put(self.path(key), data, sync_directory, expect)
        try:
            return self.call(key, put, missing_ok=False, kind=PUT)
        except ConflictError:
            raise ConflictError(key) from None  # named by the store's key, whatever the store

    def delete(self, key: str, *, expect: Expect = ANY) -> None:
        self.check_writable(key)
        try:
            self.call(key, self.driver.delete(self.path(key), expect), kind=DELETE)
        except ConflictError:
            raise ConflictError(key) from None

    def sync_directories(self, keys: Iterable[str]) -> None:
        """Make the puts and deletes of `keys` durable (local: fsync their directories; a
        driver that `commits`: commit)."""
        for where, operation in self.driver.sync([self.path(key) for key in keys], self.root):
            key = "" if where == self.root else self.key_of(where)
            try:
                self.call(key, operation, kind=SYNC)
            except ConflictError as e:  # (displaced by another writer's commit: merge again)
                raise ConflictError(*map(self.key_of, e.keys)) from None

    def check_writable(self, key: str) -> None:
        if self.read_only:
            raise ReadOnlyError(f"store is read-only; cannot write {key!r}")

    # -- errors and deadlines ------------------------------------------------------------

    def call(self, key: str, operation: Callable[[float | None], T], *,
             missing_ok: bool = True, kind: str = OTHER, objects: int = 1) -> T | None:
        """Run one store operation under the store's deadline (see `deadline.run`):
        `operation` is given the seconds its attempt may take. `kind` (`observe.KINDS`) is
        what the observer, if any, files it under; `objects`, how many objects it covers."""
        observer, run = self.observer, functools.partial(
            deadline.run, key, operation, self.retry, self.driver.errors, bounded=self.bounded,
            answers=self.answers, missing_ok=missing_ok)
        if observer is None:
            return run()
        return observed(observer, kind, self.path(key),
                        functools.partial(run, on_retry=functools.partial(observer.retried, kind)),
                        objects=objects)
