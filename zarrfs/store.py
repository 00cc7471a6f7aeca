"""A thin key/value layer over fsspec: get (whole or a byte range), put, delete, list.

Methods are synchronous and thread-safe; the fuse layer calls them from worker threads so
the event loop never blocks on I/O. A missing key is a return value (None), never an
exception; any other failure is a `StoreError` naming the key. A put replaces the object
atomically: local files are written to a temporary file, fsynced and renamed over the key,
so a reader never sees half a chunk.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import random
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import fsspec
from fsspec.implementations.local import LocalFileSystem

from .errors import ReadOnlyError, StoreError

log = logging.getLogger(__name__)
T = TypeVar("T")


def _client_errors() -> tuple[tuple[type[BaseException], ...], tuple[type[BaseException], ...]]:
    """(worth retrying, not worth retrying): remote clients raise errors that are not OSErrors
    (botocore's through s3fs, aiohttp's through the http filesystem)."""
    transient: list[type[BaseException]] = [OSError, TimeoutError]
    permanent: list[type[BaseException]] = []
    with contextlib.suppress(ImportError):
        from botocore.exceptions import BotoCoreError, ConnectionError, HTTPClientError

        transient += [ConnectionError, HTTPClientError]
        permanent.append(BotoCoreError)  # bad parameters, missing credentials, ...
    with contextlib.suppress(ImportError):
        from aiohttp import ClientError

        transient.append(ClientError)
    return tuple(transient), tuple(permanent)


_TRANSIENT, _PERMANENT = _client_errors()
_NOT_RETRIED: tuple[type[BaseException], ...] = (
    PermissionError, IsADirectoryError, NotADirectoryError, *_PERMANENT
)

# Temporary files of atomic local puts. Chunk keys never start with a dot, so these are
# never taken for chunks; the pid lets a later mount remove those of dead processes.
TEMP_PREFIX = ".zarrfs-tmp-"


@dataclass(frozen=True)
class ByteRange:
    """Bytes [start, start + length) of an object; fewer come back past its end."""

    start: int
    length: int


@dataclass(frozen=True)
class SuffixRange:
    """The last `length` bytes of an object."""

    length: int


@dataclass(frozen=True)
class RetryPolicy:
    """How long a transient failure of a remote store is retried before it is reported."""

    deadline_seconds: float = 10.0
    first_delay: float = 0.05
    max_delay: float = 2.0


class Store:
    def __init__(
        self,
        fs: fsspec.AbstractFileSystem,
        root: str,
        *,
        read_only: bool = False,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.fs = fs
        self.root = root.rstrip("/")
        self.is_local = isinstance(fs, LocalFileSystem)
        self.read_only = read_only or (self.is_local and not _local_writable(self.root))
        # Local failures are not transient; remote ones often are.
        self.retry = RetryPolicy(deadline_seconds=0) if self.is_local else (retry or RetryPolicy())

    @classmethod
    def open(
        cls, url: str, storage_options: Mapping[str, Any] | None = None, *, read_only: bool = False
    ) -> Store:
        """A store for a local path or any fsspec URL."""
        try:
            fs, root = fsspec.core.url_to_fs(url, **(storage_options or {}))
        except (ValueError, ImportError, OSError) as e:
            raise StoreError(url, f"cannot open: {e}") from None
        return cls(fs, root, read_only=read_only)

    def child(self, path: str) -> Store:
        """The same store rooted at `path` below this one (an array inside a group)."""
        if not path:
            return self
        child = Store(self.fs, self.path(path), read_only=self.read_only, retry=self.retry)
        return child

    def path(self, key: str) -> str:
        return f"{self.root}/{key}" if key else self.root

    # -- reads -------------------------------------------------------------------------------

    def get(self, key: str, byte_range: ByteRange | SuffixRange | None = None) -> bytes | None:
        path = self.path(key)
        if self.is_local and not isinstance(byte_range, SuffixRange):
            # Plain system calls: fsspec's buffered file objects cost as much as decoding.
            return self._call(key, lambda: _local_read(path, byte_range))
        if byte_range is None:
            return self._call(key, lambda: self.fs.cat_file(path))
        if isinstance(byte_range, SuffixRange):
            return self._get_suffix(key, byte_range.length)
        start, end = byte_range.start, byte_range.start + byte_range.length
        return self._call(key, lambda: self.fs.cat_file(path, start=start, end=end))

    def _get_suffix(self, key: str, length: int) -> bytes | None:
        size = self.size(key)
        if size is None:
            return None
        start = max(0, size - length)
        return self._call(key, lambda: self.fs.cat_file(self.path(key), start=start, end=size))

    def size(self, key: str) -> int | None:
        info = self._call(key, lambda: self.fs.info(self.path(key)))
        return None if info is None else int(info["size"])

    def exists(self, key: str) -> bool:
        return self.size(key) is not None

    def list(self, prefix: str = "") -> Iterator[str]:
        """Keys below `prefix` (a directory-like prefix such as "c/1"), in no set order."""
        base = self.path(prefix)
        found = self._call(prefix, lambda: self.fs.find(base))
        skip = len(self.root) + 1
        for path in found or []:
            key = path[skip:] if path.startswith(self.root + "/") else path
            if not key.rsplit("/", 1)[-1].startswith(TEMP_PREFIX):
                yield key

    def list_dirs(self, prefix: str = "") -> tuple[str, ...]:
        """The names of the directories (common prefixes) directly below `prefix`."""
        base = self.path(prefix)
        if self.is_local:
            found = self._call(prefix, lambda: [e.name for e in os.scandir(base) if e.is_dir()])
            return tuple(sorted(found or []))
        entries = self._call(prefix, lambda: self.fs.ls(base, detail=True))
        return tuple(sorted(e["name"].rstrip("/").rsplit("/", 1)[-1] for e in entries or []
                            if e.get("type") == "directory"))

    # -- writes ------------------------------------------------------------------------------

    def put(self, key: str, data: bytes | bytearray | memoryview, *, sync_directory: bool = True) -> None:
        """Replace `key` atomically. A local put is durable when it returns, unless
        `sync_directory` is False: then `sync_directories` must follow (a batch of puts to one
        directory then costs one directory fsync, not one each)."""
        self._check_writable(key)
        if self.is_local:
            path = self.path(key)
            self._call(key, lambda: _atomic_local_write(path, data, sync_directory), missing_ok=False)
        else:
            self._call(key, lambda: self.fs.pipe_file(self.path(key), bytes(data)), missing_ok=False)

    def delete(self, key: str) -> None:
        self._check_writable(key)
        self._call(key, lambda: self._remove(key))

    def sync_directories(self, keys: Iterable[str]) -> None:
        """Make the puts and deletes of `keys` durable (local stores: fsync their directories)."""
        if not self.is_local:
            return
        for directory in sorted({os.path.dirname(self.path(key)) for key in keys}):
            self._call(directory, functools.partial(_fsync_directory, directory))

    def _remove(self, key: str) -> bool:
        with contextlib.suppress(FileNotFoundError):
            self.fs.rm_file(self.path(key))
        return True

    def _check_writable(self, key: str) -> None:
        if self.read_only:
            raise ReadOnlyError(f"store is read-only; cannot write {key!r}")

    def remove_stale_temporaries(self) -> int:
        """Delete temporary files left by atomic puts of processes that have died."""
        if not self.is_local or self.read_only:
            return 0
        removed = 0
        for directory, _, files in os.walk(self.root):
            for name in files:
                if name.startswith(TEMP_PREFIX) and not temporary_owner_alive(name):
                    with contextlib.suppress(OSError):
                        os.unlink(os.path.join(directory, name))
                        removed += 1
        return removed

    # -- errors and retries ------------------------------------------------------------------

    def _call(self, key: str, operation: Callable[[], T], *, missing_ok: bool = True) -> T | None:
        """Run one store operation: None for a missing key (when reading), retries for
        transient faults until the deadline, StoreError for the rest."""
        deadline = time.monotonic() + self.retry.deadline_seconds
        delay = self.retry.first_delay
        while True:
            try:
                return operation()
            except FileNotFoundError as e:
                if missing_ok:
                    return None
                raise StoreError(key, f"not found: {e}") from None
            except _NOT_RETRIED as e:
                raise StoreError(key, one_line(e)) from None
            except _TRANSIENT as e:
                if time.monotonic() + delay > deadline:
                    raise StoreError(key, one_line(e)) from None
                log.warning("store key %r: %s; retrying", key, e)
                time.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 2, self.retry.max_delay)


def _atomic_local_write(path: str, data: bytes | bytearray | memoryview, sync_directory: bool) -> bool:
    directory, name = os.path.split(path)
    os.makedirs(directory, exist_ok=True)
    temp = os.path.join(directory, f"{TEMP_PREFIX}{os.getpid()}-{random.getrandbits(48):012x}-{name}")
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            view = memoryview(data).cast("B")
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    if sync_directory:
        _fsync_directory(directory)
    return True


def _fsync_directory(directory: str) -> bool:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return True


def one_line(error: BaseException) -> str:
    """An error's text on one line (what logs and one-line messages show)."""
    return " ".join(str(error).split()) or type(error).__name__


def _local_read(path: str, byte_range: ByteRange | None) -> bytes:
    fd = os.open(path, os.O_RDONLY)
    try:
        if byte_range is not None:
            return os.pread(fd, byte_range.length, byte_range.start)
        size = os.fstat(fd).st_size
        data = os.pread(fd, size, 0)
        while len(data) < size:  # a short read of a regular file: keep going
            more = os.pread(fd, size - len(data), len(data))
            if not more:
                break
            data += more
        return data
    finally:
        os.close(fd)


def _local_writable(path: str) -> bool:
    """Whether we may write at `path` or, if it does not exist yet, create it."""
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return os.access(path, os.W_OK)


def temporary_owner_alive(temp_name: str) -> bool:
    """Whether the process that is writing a temporary file of an atomic put still runs."""
    pid_text = temp_name[len(TEMP_PREFIX) :].split("-", 1)[0]
    if not (pid_text.isascii() and pid_text.isdigit()):
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
