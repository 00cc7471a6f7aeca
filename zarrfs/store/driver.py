"""The contract of a backend, as TensorStore's kvstore `driver.h`: a `Driver` is one backend
family (its folder of `store/`: local/, objects/, icechunk/, references/, zipfiles/, `http`),
and says what it can do as one value (`capabilities`) and how it does each operation. An
operation a driver may lack returns None where it cannot (`read_ranges`, `delete_tree`...);
one it lacks by its capabilities is never asked of it. `sources.driver_for` is the one place
that maps a filesystem to its driver. An adapter (`Adapter`: a zip archive's) makes a driver
over another store, as TensorStore's zip kvstore wraps a base kvstore.

Each operation is one attempt, given the seconds it may take (None: unbounded): the store
(`base.BaseStore`) runs it under its deadline, retries and observer, and addresses it by a path
below its root. A missing object raises FileNotFoundError, which the store turns into None.
The defaults serve any fsspec filesystem (memory://, ...): no generations, no compare-and-swap,
writes durable when they return."""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Sequence
from typing import Any, Final, Protocol

import fsspec

from . import deadline
from .capabilities import Capabilities
from .ranges import ByteRange, SuffixRange
from .values import Opened, Payload, Versioned, info_generation, pieces

Operation = Callable[[float | None], Any]
Mark = Callable[[], None]  # (`deadline.Answers.mark`: a batch marks each answer it gets)


class AnyGeneration:
    def __repr__(self) -> str:
        return "ANY"


# Passed as `expect` to put or delete: write whatever is stored now.
ANY: Final = AnyGeneration()
Expect = str | None | AnyGeneration


class Driver:
    """One backend family over an fsspec filesystem (the defaults: any filesystem)."""

    capabilities = Capabilities()

    def __init__(self, fs: fsspec.AbstractFileSystem) -> None:
        self.fs = fs

    @property
    def protocol(self) -> str:
        """The name of the filesystem's protocol (its first): what sets the stores of one
        backend apart from another's (a disk cache's entries)."""
        protocol = self.fs.protocol
        return protocol if isinstance(protocol, str) else str(protocol[0])

    @property
    def errors(self) -> tuple[deadline.Errors, deadline.Errors]:
        """The errors worth retrying, and those not (`deadline.error_kinds`)."""
        return deadline.error_kinds(self.capabilities.round_trips)

    def call(self, seconds: float | None, method: str, *args: Any, **kwargs: Any) -> Any:
        """A method of the filesystem, abandoned after `seconds` (`deadline.call`)."""
        return deadline.call(self.fs, seconds, method, *args, **kwargs)

    def writable(self, root: str) -> bool:
        """Whether the store at `root` may be written (local files: permission to)."""
        return True

    def prepare(self, seconds: float | None, root: str) -> None:
        """Make the clients the reads of `root` use, before the first read."""

    def start_writes(self, writable: bool) -> bool:
        """Whether the source may be written. A source written only when asked to (Icechunk
        at a branch, with -o rw; ValueError elsewhere) is started writing if `writable`."""
        return True

    # -- reads -------------------------------------------------------------------------------

    def cat(self, seconds: float | None, path: str, start: int | None = None,
            end: int | None = None) -> bytes:
        if start is None and end is None:
            return self.call(seconds, "cat_file", path)  # type: ignore[no-any-return]
        return self.call(seconds, "cat_file", path, start=start, end=end)  # type: ignore[no-any-return]

    def read(self, seconds: float | None, path: str, start: int | None, length: int | None) -> Versioned:
        """The bytes of `path` (from `start`, `length` of them) and their generation."""
        end = None if start is None or length is None else start + length
        return Versioned(self.cat(seconds, path, start, end), None)

    def read_ranges(self, path: str, pairs: Sequence[tuple[int, int]], mark: Mark) -> Operation | None:
        """One operation reading ranges (start, length) of one object in one call (a list of
        `Versioned`; None: not stored); None: the driver reads them one at a time."""
        return None

    def read_objects(self, paths: Sequence[str], mark: Mark) -> Operation | None:
        """One operation reading whole objects in one call (a list of `Versioned`, None for
        those not stored); None: the driver reads them one at a time."""
        return None

    def describe(self, seconds: float | None, path: str) -> tuple[int, str | None]:
        """The size and generation of `path`, as stored now."""
        self.fs.invalidate_cache(path)  # (a filesystem built elsewhere may cache listings)
        info = self.call(seconds, "info", path)
        return int(info["size"]), info_generation(info)

    def read_cached(self, path: str, start: int, into: memoryview) -> str | None:
        """(local files) Fill `into` without waiting: its generation, or None."""
        return None

    def read_whole_cached(self, path: str, into: memoryview) -> tuple[int, str | None] | None:
        """(local files) Fill `into` with all of `path` without waiting: its size and
        generation, or None."""
        return None

    def read_edge_cached(self, path: str, into: memoryview, *, at_end: bool) -> tuple[int, str] | None:
        """(local files) Fill `into` with an end of `path` without waiting: size and generation."""
        return None

    def opened(self, path: str) -> Opened:
        """(`capabilities.local_files`) The file at `path` opened to be read elsewhere."""
        raise NotImplementedError(f"{path}: not a local file")

    def lend_directory(self, path: str) -> int | None:
        """(local files) The directory at `path` opened for another process to open the files
        below it itself, with the rules this driver's own opens keep (`open_below`); None
        where it cannot."""
        return None

    def known_generation(self, path: str) -> str:
        """(`capabilities.knows_generations`) The generation of `path` as last followed,
        without a request."""
        raise NotImplementedError

    def resume(self, generations: Sequence[str]) -> None:
        """(`capabilities.knows_generations`) Take up from `generations` (those an earlier
        mount read, the last used first) where what changed since left keys as they were."""
        raise NotImplementedError

    # -- listings ----------------------------------------------------------------------------

    def find(self, seconds: float | None, base: str) -> list[str]:
        """The paths of every object below `base`."""
        return list(self.call(seconds, "find", base))

    def listed(self, seconds: float | None, base: str, prefix: str = "") -> dict[str, dict[str, Any]]:
        """Every object below `base` whose name there starts with `prefix`, as fsspec's `find`
        describes it, as stored now."""
        self.fs.invalidate_cache(base)
        if prefix:
            return dict(self.call(seconds, "find", base, prefix=prefix, detail=True))
        return dict(self.call(seconds, "find", base, detail=True))

    def scanned(self, root: str, keys: Sequence[str]) -> dict[str, tuple[int, str | None] | None]:
        """(`capabilities.local_files`) What one scan of each directory holding `keys` says."""
        raise NotImplementedError

    def directories(self, seconds: float | None, base: str) -> tuple[str, ...]:
        """The names of the directories directly below `base`, now."""
        self.fs.invalidate_cache(base)
        entries = self.call(seconds, "ls", base, detail=True)
        return tuple(sorted(e["name"].rstrip("/").rsplit("/", 1)[-1] for e in entries or []
                            if e.get("type") == "directory"))

    def forget(self, path: str) -> None:
        """Forget what the filesystem keeps of listings below `path` (one built elsewhere may)."""
        self.fs.invalidate_cache(path)

    # -- versions (`capabilities.versions`) ----------------------------------------------------

    def version_names(self, seconds: float | None, kind: str) -> list[str]:
        """The branches, tags or snapshots (`kind`) there are now."""
        raise NotImplementedError

    def version_log(self, seconds: float | None) -> bytes:
        """The mounted branch's commits, newest first, one a line."""
        raise NotImplementedError

    def create_version(self, seconds: float | None, kind: str, name: str) -> None:
        """A new tag or branch at the mounted branch's head."""
        raise NotImplementedError

    # -- writes ------------------------------------------------------------------------------

    def put(self, path: str, data: Payload, sync_directory: bool, expect: Expect) -> Operation:
        """The operation that replaces `path` (its new generation, or None); `expect` is
        honoured where the driver is `capabilities.conditional` (ConflictError)."""
        return functools.partial(self._pipe, path, joined(data))

    def delete(self, path: str, expect: Expect) -> Operation:
        return functools.partial(self._remove, path)

    def sync(self, paths: Sequence[str], root: str) -> list[tuple[str, Operation]]:
        """What makes the writes of `paths` durable: (the path it concerns, the operation)."""
        return []

    def delete_tree(self, path: str) -> Operation | None:
        """One operation deleting everything below `path`, how many objects (None: key by key)."""
        return None

    def move_tree(self, old: str, new: str) -> Operation | None:
        """One operation moving everything below `old` to `new`, how many (None: key by key)."""
        return None

    def exchange_trees(self, first: str, second: str) -> Operation | None:
        """One operation swapping what is below two paths (None: the driver cannot)."""
        return None

    def delete_paths(self, seconds: float | None, paths: Sequence[str]) -> None:
        """(`capabilities.bulk_deletes`) Delete many objects in one request."""
        self.call(seconds, "rm", list(paths))

    def copy(self, seconds: float | None, path: str, target: str) -> None:
        """Copy one object to `target` (server-side where the filesystem can)."""
        self.call(seconds, "cp_file", path, target)

    def room(self, root: str) -> os.statvfs_result | None:
        """What the filesystem holding `root` has room for (`os.statvfs`; None: not known)."""
        return None

    def remove_stale_temporaries(self, root: str) -> int:
        return 0

    def _pipe(self, path: str, data: bytes, seconds: float | None) -> None:
        self.call(seconds, "pipe_file", path, data)

    def _remove(self, path: str, seconds: float | None) -> bool:
        with contextlib.suppress(FileNotFoundError):
            self.call(seconds, "rm_file", path)
        return True


def joined(data: Payload) -> bytes:
    return b"".join(pieces(data))


class Container(Protocol):
    """What an adapter reads through: a store (`core.Store`) of any driver."""

    @property
    def capabilities(self) -> Capabilities: ...

    def size(self, key: str) -> int | None: ...
    def get(self, key: str, byte_range: ByteRange | SuffixRange | None = None) -> bytes | None: ...


class Adapter(Protocol):
    """A source read through the store of another (`below`): a zip archive, read through the
    store of its directory. Its stores are read-only."""

    @property
    def below(self) -> str:
        """The URL of the store it is read through."""

    @property
    def kind(self) -> str:
        """What its mounts are called ("zip")."""

    def over(self, container: Container) -> tuple[Driver, str]:
        """Its driver, reading through `container`, and the root of the store in it
        (StoreError: `container` holds no such thing)."""
