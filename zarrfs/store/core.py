"""A thin key/value layer over fsspec: get (whole or a byte range), put, delete, list, and a
generation per object (for revalidation and compare-and-swap).

Methods are synchronous and thread-safe; the fuse layer calls them from worker threads so
the event loop never blocks on I/O. A missing key is a return value (None), never an
exception; any other failure is a `StoreError` naming the key. A put replaces the object
atomically (local files: `local.write_atomically`), so a reader never sees half a chunk.

Compare-and-swap: `put` and `delete` take `expect`, the generation the caller read (None: the
key must not exist), and raise `ConflictError` when the object is no longer that one. Local
stores, S3, GCS, Azure and Icechunk honour it (`conditional`); on other stores it is ignored and
concurrent writers are not coordinated. Icechunk (`commits`): what makes writes durable is a commit.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from typing import Any, TypeVar

import fsspec
from fsspec.implementations.local import LocalFileSystem

from ..errors import ConflictError, ReadOnlyError, StoreError, missing_package
from . import deadline, fetching, listing, local, many, objects, prefixes, writing
from .capabilities import Capabilities, capabilities_of
from .deadline import RetryPolicy, one_line
from .disk_cache import CachedReads
from .local import TEMP_PREFIX
from .observe import DELETE, GET, GET_RANGE, LIST, OTHER, PUT, STAT, SYNC, StoreObserver, observed
from .ranges import ByteRange, SuffixRange
from .settings import SourceSettings
from .sources import endpoint, is_read_only, open_filesystem, start_writes
from .values import Payload, Versioned, as_bytes
from .writing import ANY, Expect
from .zipfiles import ZipSource, open_zip

T = TypeVar("T")
log = logging.getLogger(__name__)
__all__ = ["ANY", "ByteRange", "Capabilities", "Expect", "RetryPolicy", "Store", "SuffixRange", "one_line"]
# Opening a remote store first tries to connect to its server, this long at most: a refused
# connection or an unknown host fails the opening at once (deadline.reach).
REACH_SECONDS = 2.0


class Store:
    def __init__(
        self,
        fs: fsspec.AbstractFileSystem,
        root: str,
        *,
        read_only: bool = False,
        retry: RetryPolicy | None = None,
        observer: StoreObserver | None = None,
        disk_cache: CachedReads | None = None,
        confined: local.Root | None = None,
        answers: deadline.Answers | None = None,
    ) -> None:
        """`answers`: when the store last answered, shared by every view of one store."""
        self.fs = fs
        self.observer = observer  # (metrics: every operation reported to it)
        self.disk_cache = disk_cache  # (-o disk_cache: reads kept on local disk, `disk_cache_reads`)
        self.root = root.rstrip("/")
        self.is_local = isinstance(fs, LocalFileSystem)
        self.confined = confined or (local.Root(self.root) if self.is_local else None)
        self.is_s3 = objects.is_s3(fs)
        self.is_gcs = objects.is_gcs(fs)
        self.is_azure = objects.is_azure(fs)
        self.capabilities = capabilities_of(fs)  # (what the layers above ask of it)
        # (Icechunk: each read comes with the snapshot its key last changed in)
        self.reads_generations = bool(getattr(fs, "reads_report_generations", False))
        self.commits = bool(getattr(fs, "commits_on_sync", False))
        self.read_only = read_only or (self.is_local and not local.writable(self.root))
        # Local failures are not transient, and a system call cannot be abandoned: local
        # operations get one attempt and no deadline. Remote ones get both.
        self.bounded = not self.is_local
        self.retry = RetryPolicy(retries=False) if self.is_local else (retry or RetryPolicy())
        self._errors = deadline.error_kinds(not self.is_local, self.is_azure)
        self.answers = answers or deadline.Answers()

    @classmethod
    def open(cls, url: str, storage_options: Mapping[str, Any] | None = None, *,
             read_only: bool = False, settings: SourceSettings | None = None,
             observer: StoreObserver | None = None, writable: bool = False) -> Store:
        """A store for a local path, an fsspec URL, a reference set, an Icechunk repository
        (see `sources`) or a zip archive (`zipped`: read-only; the archive is read through a
        store of its directory, and `writable`, a caller that insists on writing, is refused)."""
        settings = settings or SourceSettings()
        source = ZipSource.parse(url)
        if source is None:
            return cls._open_source(url, storage_options, read_only, settings, observer, writable)
        if writable:
            raise ReadOnlyError(f"zip mounts are read-only: mount {url} without -o rw")
        container = cls._open_source(source.directory, storage_options, True, settings, observer, False)
        fs, root = open_zip(source, container)
        # (the archive's reads are retried, and observed, by the container alone)
        return cls(fs, root, read_only=True, retry=dataclasses.replace(container.retry, retries=False),
                   answers=container.answers)

    @classmethod
    def _open_source(cls, url: str, storage_options: Mapping[str, Any] | None, read_only: bool,
                     settings: SourceSettings, observer: StoreObserver | None, writable: bool) -> Store:
        try:
            fs, root = open_filesystem(url, storage_options or {}, settings)
            read_only = read_only or not start_writes(fs, writable and not read_only)
        except (ValueError, ImportError, OSError) as e:
            raise StoreError(url, f"cannot open: {missing_package(e) or one_line(e)}") from None
        timeout = settings.timeout_for(fs)
        retry = None if timeout is None else RetryPolicy(deadline_seconds=timeout)
        server = endpoint(url, storage_options or {})
        if server is not None and timeout is not None:
            deadline.reach(server, min(timeout, REACH_SECONDS))
        local_root = local.Root(root, settings.references_allow) if isinstance(fs, LocalFileSystem) else None
        return cls(fs, root, read_only=read_only or is_read_only(fs), retry=retry, observer=observer,
                   confined=local_root)

    def prepare(self) -> None:
        """Make the clients the reads use now (a mount, before it serves), not at the first
        read; a fault is left to that read, which reports it."""
        try:
            objects.prepare(self.fs, self.retry.deadline_seconds, self.root)
        except Exception as e:  # (whatever the clients raise: the first read meets it again)
            log.debug("could not prepare the clients of %s: %s", self.root, one_line(e))

    def child(self, path: str) -> Store:
        """The same store rooted at `path` below this one (an array inside a group)."""
        if not path:
            return self
        return Store(self.fs, self.path(path), read_only=self.read_only, retry=self.retry,
                     observer=self.observer, disk_cache=self.disk_cache, confined=self.confined,
                     answers=self.answers)

    def without_retries(self, within: float = math.inf) -> Store:
        """The same store, failing at the first fault within its deadline (or `within` seconds,
        when sooner): a check that may be skipped."""
        retry = dataclasses.replace(self.retry, retries=False,
                                    deadline_seconds=min(self.retry.deadline_seconds, within))
        return Store(self.fs, self.root, read_only=self.read_only, retry=retry, observer=self.observer,
                     disk_cache=self.disk_cache, confined=self.confined, answers=self.answers)

    def path(self, key: str) -> str:
        return f"{self.root}/{key}" if key else self.root

    # -- reads -------------------------------------------------------------------------------

    @property
    def versioned(self) -> bool:
        """Whether reads report the generation of what they read."""
        return self.conditional or self.reads_generations

    @property
    def conditional(self) -> bool:
        """Whether puts and deletes honour `expect` (compare-and-swap)."""
        return self.is_local or self.is_s3 or self.is_gcs or self.is_azure or self.commits

    def get(self, key: str, byte_range: ByteRange | SuffixRange | None = None) -> bytes | None:
        if isinstance(byte_range, SuffixRange):
            return fetching.read_suffix(self, key, byte_range.length)
        if self.versioned:
            found = self.read(key, byte_range)
            return None if found is None else as_bytes(found.data)
        path = self.path(key)
        if byte_range is None:
            return self.call(key, lambda s: self.fs_call(s, "cat_file", path), kind=GET)
        start, end = byte_range.start, byte_range.start + byte_range.length
        return self.call(key, lambda s: self.fs_call(s, "cat_file", path, start=start, end=end),
                         kind=GET_RANGE)

    def read(self, key: str, byte_range: ByteRange | None = None) -> Versioned | None:
        """The bytes and the generation they were read at, in one request where the store can
        (local files, S3); elsewhere the generation is None."""
        if self.disk_cache is None:
            return fetching.read(self, key, byte_range)
        if byte_range is None:  # (one object, or one range of it, as the disk cache serves many)
            return self.disk_cache.read_many(self, [key], functools.partial(fetching.read_many, self))[0]
        fetch = functools.partial(fetching.read_ranges, self)
        found = self.disk_cache.read_ranges(self, key, [byte_range], fetch)
        return None if found is None else found[0]

    def cached_whole(self, key: str) -> tuple[int, str] | None:
        """The size and generation of `key` where the disk cache holds all of it at the
        generation the mount may serve (reads of it cost no request, like a local file's)."""
        return None if self.disk_cache is None else self.disk_cache.whole(self, key)

    def read_cached(self, key: str, start: int, into: memoryview) -> str | None:
        """Fill `into` from `start` of `key` without waiting (local, cached): its generation, or None."""
        return None if not self.confined else local.read_cached(self.confined, self.path(key), start, into)

    def read_whole_cached(self, key: str, into: memoryview) -> int | None:
        """Fill the start of `into` with all of `key` without waiting (local, cached, fits):
        its size (-1: not stored), or None."""
        return None if self.confined is None else local.read_whole_cached(self.confined, self.path(key), into)

    def read_edge_cached(self, key: str, into: memoryview, *, at_end: bool) -> tuple[int, str] | None:
        """Fill `into` with the first (`at_end`: last) bytes of `key` without waiting (local,
        cached): its size and generation, or None."""
        found = self.confined
        return None if found is None else local.read_edge_cached(found, self.path(key), into, at_end=at_end)

    def read_ranges(self, key: str, ranges: Sequence[ByteRange]) -> list[Versioned] | None:
        """Byte ranges of one object, each with the generation it was read at (None: `key`
        is not stored). Each range is one request under the store's deadline; on a remote
        store they are all in flight at once (each waits a round trip, not for the others):
        on S3 as one batch of requests on fsspec's loop, elsewhere a thread each."""
        if self.disk_cache is not None:
            fetch = functools.partial(fetching.read_ranges, self)
            return self.disk_cache.read_ranges(self, key, ranges, fetch)
        return fetching.read_ranges(self, key, ranges)

    def read_many(self, keys: Sequence[str], *,
                  unchecked: dict[str, str] | None = None) -> list[Versioned | None]:
        """Whole objects as `read` (None: not stored); on S3 and Azure all in flight at once, one
        batch under the store's deadline (one wait and thread hop for the lot), elsewhere in turn.
        `unchecked` (given): objects the disk cache holds whose close-to-open check is under
        way are read without waiting for it; their keys and generations are put in it, and
        nothing made of them may be served before `confirm` says they were current."""
        if self.disk_cache is not None:
            fetch = functools.partial(fetching.read_many, self)
            return self.disk_cache.read_many(self, keys, fetch, unchecked)
        return fetching.read_many(self, keys)

    def confirm(self, unchecked: Mapping[str, str]) -> Future[set[str]]:
        """The keys of `unchecked` (from `read_many`) whose generation read was not current,
        once their checks answer."""
        if self.disk_cache is None or not unchecked:
            answered: Future[set[str]] = Future()
            answered.set_result(set())
            return answered
        return self.disk_cache.confirm(self, unchecked)

    def generation(self, key: str) -> str | None:
        """Which version of `key` is stored now (None: none)."""
        described = self.stat(key)
        return None if described is None else described[1]

    def generations(self, keys: Iterable[str], *, holds: int | None = None) -> dict[str, str | None]:
        """The generations of many keys, found as `stats` finds them: a recheck's question
        (close-to-open), after which the disk cache trusts nothing below this store it knew
        before. `holds`: how many objects the store may hold, where known (an array's grid)."""
        if self.disk_cache is not None:
            self.disk_cache.rechecking(self, holds)
        return {key: None if found is None else found[1] for key, found in self.stats(keys).items()}

    def stats(self, keys: Iterable[str], *, dense: bool = False, whole: bool = False,
              prefix: str | None = None, by_rows: bool = False) -> dict[str, tuple[int, str | None] | None]:
        """The size and generation of many keys (None: not stored), at a cost in proportion to
        the keys, never to the store (`many.stats`). `dense`: the keys are most of what their
        directories may hold (every chunk of an array): one listing of them is cheapest.
        `whole`: what holds them holds no more than a listing's page (a small array).
        `prefix`: they all begin so, and few other keys do (one listing of them). `by_rows`:
        dense, and listed by their rows however few they are (rows known to be stored)."""
        tick = self.disk_cache.tick() if self.disk_cache is not None else 0
        found = many.stats(self, list(keys), dense=dense, whole=whole, prefix=prefix, by_rows=by_rows)
        if self.disk_cache is not None:
            self.disk_cache.learned(self, found, tick)
        return found

    def size(self, key: str) -> int | None:
        return None if (described := self.stat(key)) is None else described[0]

    def stat(self, key: str) -> tuple[int, str | None] | None:
        """The size and generation of `key` (None: not stored)."""
        if self.disk_cache is None:
            return self._stat(key)
        tick = self.disk_cache.tick()
        found = self._stat(key)
        self.disk_cache.learned(self, {key: found}, tick)
        return found

    def _stat(self, key: str) -> tuple[int, str | None] | None:
        path, confined = self.path(key), self.confined
        if confined is not None:
            return self.call(key, lambda s: confined.describe(path), kind=STAT)
        self.fs.invalidate_cache(path)  # (a filesystem built elsewhere may cache listings)
        info = self.call(key, lambda s: self.fs_call(s, "info", path), kind=STAT)
        return None if info is None else (int(info["size"]), objects.info_generation(info))

    def exists(self, key: str) -> bool:
        return self.size(key) is not None

    def list(self, prefix: str = "") -> Iterator[str]:
        """Keys below `prefix` (a directory-like prefix such as "c/1"), in no set order."""
        base, confined = self.path(prefix), self.confined
        found = self.call(prefix, lambda s: self.fs_call(s, "find", base) if confined is None
                          else listing.walk(confined, base), kind=LIST)
        for key in map(self.key_of, found or []):
            if not key.rsplit("/", 1)[-1].startswith(TEMP_PREFIX):
                yield key

    def key_of(self, path: str) -> str:
        """The key of a path of the filesystem's below this store's root."""
        path = path.rstrip("/")
        return path[len(self.root) + 1 :] if path.startswith(self.root + "/") else path

    def list_dirs(self, prefix: str = "") -> tuple[str, ...]:
        """The names of the directories (common prefixes) directly below `prefix`, now."""
        base, confined = self.path(prefix), self.confined
        if confined is not None:
            return self.call(prefix, lambda s: listing.directories(confined, base), kind=LIST) or ()
        self.fs.invalidate_cache(base)
        entries = self.call(prefix, lambda s: self.fs_call(s, "ls", base, detail=True), kind=LIST)
        return tuple(sorted(e["name"].rstrip("/").rsplit("/", 1)[-1] for e in entries or []
                            if e.get("type") == "directory"))

    # -- writes ------------------------------------------------------------------------------

    def put(self, key: str, data: Payload, *, sync_directory: bool = True,
            expect: Expect = ANY) -> str | None:
        """Replace `key` atomically; its new generation (None where the store cannot tell).
        A local put is durable when it returns, unless `sync_directory` is False: then
        `sync_directories` must follow (a batch of puts to one directory then costs one
        directory fsync, not one each). ConflictError when `expect` no longer holds."""
        self.check_writable(key)
        self._changing(key)
        put = writing.put(self, key, data, sync_directory, expect)
        try:
            return self.call(key, put, missing_ok=False, kind=PUT)
        except ConflictError:
            raise ConflictError(key) from None  # named by the store's key, whatever the store
        finally:
            self._changing(key)

    def delete(self, key: str, *, expect: Expect = ANY) -> None:
        self.check_writable(key)
        self._changing(key)
        try:
            self.call(key, writing.delete(self, key, expect), kind=DELETE)
        except ConflictError:
            raise ConflictError(key) from None
        finally:
            self._changing(key)

    def _changing(self, key: str) -> None:
        """A write or delete of `key`, before and after: nothing read before it is kept."""
        if self.disk_cache is not None:
            self.disk_cache.changing(self, key)

    def sync_directories(self, keys: Iterable[str]) -> None:
        """Make the puts and deletes of `keys` durable (local: fsync their directories; `commits`: commit)."""
        if self.commits:
            paths = [self.path(key) for key in keys]
            if not paths:  # (nothing asked for: a group commit is not waited for)
                return
            try:
                self.call("", lambda s: writing.on_branch(self, "commit", paths, ANY, s), kind=SYNC)
            except ConflictError as e:  # (displaced by another writer's commit: merge again)
                raise ConflictError(*map(self.key_of, e.keys)) from None
        elif self.is_local:
            writing.sync_local(self, keys)

    def check_writable(self, key: str) -> None:
        if self.read_only:
            raise ReadOnlyError(f"store is read-only; cannot write {key!r}")

    def statvfs(self) -> os.statvfs_result | None:
        """What the filesystem holding a local store has room for (None: a remote store)."""
        return os.statvfs(self.root) if self.is_local else None

    def remove_stale_temporaries(self) -> int:
        """Delete temporary files left by atomic puts of processes that have died."""
        return 0 if not self.is_local or self.read_only else local.remove_stale_temporaries(self.root)

    def delete_prefix(self, prefix: str) -> int:
        """Delete every key below `prefix` (a node); how many there were (see `prefixes`)."""
        return prefixes.delete_prefix(self, prefix)

    def move_prefix(self, old: str, new: str) -> int:
        """Move every key below `old` to below `new` (holding nothing); how many (`prefixes`)."""
        return prefixes.move_prefix(self, old, new)

    def swap_prefixes(self, old: str, new: str) -> bool:
        """Swap what is below `old` and `new` in one step; False where the store cannot
        (`prefixes`)."""
        return prefixes.swap_prefixes(self, old, new)

    # -- errors and deadlines ------------------------------------------------------------

    def call(self, key: str, operation: Callable[[float | None], T], *,
             missing_ok: bool = True, kind: str = OTHER, objects: int = 1) -> T | None:
        """Run one store operation under the store's deadline (see `deadline.run`):
        `operation` is given the seconds its attempt may take. `kind` (`observe.KINDS`) is
        what the observer, if any, files it under; `objects`, how many objects it covers."""
        observer, run = self.observer, functools.partial(
            deadline.run, key, operation, self.retry, self._errors, bounded=self.bounded,
            answers=self.answers, missing_ok=missing_ok)
        if observer is None:
            return run()
        return observed(observer, kind, self.path(key),
                        functools.partial(run, on_retry=functools.partial(observer.retried, kind)),
                        objects=objects)

    def fs_call(self, seconds: float | None, method: str, *args: Any, **kwargs: Any) -> Any:
        return deadline.call(self.fs, seconds, method, *args, **kwargs)
