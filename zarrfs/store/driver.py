"""The contract of a backend, as TensorStore's kvstore `driver.h`: a `Driver` is one backend
family (its folder of `store/`: local/, objects/, icechunk/, references/, zipfiles/, `http`),
and says what it can do as one value (`capabilities`) and how it does each operation. An
operation a driver may lack returns None where it cannot (`delete_tree`, `move_tree`...);
one it lacks by its capabilities is never asked of it. `sources.driver_for` is the one place
that maps a filesystem to its driver. An adapter (`Adapter`: a zip archive's) makes a driver
over another store, as TensorStore's zip kvstore wraps a base kvstore.

What one family does and the others do not is a facet the driver hands out, or None
(`facets`): a store's local files (`local_files`), Icechunk's versions (`versions`), and the
reads S3 and Azure batch (`batches`). The methods of `Driver` are what every store does.

Each operation is one attempt, given the seconds it may take (None: unbounded): the store
(`base.BaseStore`) runs it under its deadline, retries and observer, and addresses it by a path
below its root. A missing object raises FileNotFoundError, which the store turns into None.
The defaults serve any fsspec filesystem (memory://, ...): no generations, no compare-and-swap,
writes durable when they return."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Sequence
from typing import Any, Final, Protocol

import fsspec

from . import deadline
from .capabilities import Capabilities
from .facets import Batches, Keyed, LocalFiles, Mark, Operation, VersionHistory
from .ranges import ByteRange, SuffixRange
from .values import Payload, Versioned, info_generation, pieces

__all__ = ["ANY", "Adapter", "AnyGeneration", "Container", "Driver", "Expect", "Mark", "Operation", "joined"]


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

    def describe(self, seconds: float | None, path: str) -> tuple[int, str | None]:
        """The size and generation of `path`, as stored now."""
        self.fs.invalidate_cache(path)  # (a filesystem built elsewhere may cache listings)
        info = self.call(seconds, "info", path)
        return int(info["size"]), info_generation(info)

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

    def directories(self, seconds: float | None, base: str) -> tuple[str, ...]:
        """The names of the directories directly below `base`, now."""
        self.fs.invalidate_cache(base)
        entries = self.call(seconds, "ls", base, detail=True)
        return tuple(sorted(e["name"].rstrip("/").rsplit("/", 1)[-1] for e in entries or []
                            if e.get("type") == "directory"))

    def forget(self, path: str) -> None:
        """Forget what the filesystem keeps of listings below `path` (one built elsewhere may)."""
        self.fs.invalidate_cache(path)

    # -- facets: what one family does (`facets`) --------------------------------------------

    def local_files(self, store: Keyed) -> LocalFiles | None:
        """(`capabilities.local_files`) What only local files do, for the store `store`."""
        return None

    def versions(self) -> VersionHistory | None:
        """(`capabilities.versions`, `knows_generations`) The source's versions."""
        return None

    def batches(self) -> Batches | None:
        """Reads of many objects, or of many ranges of one, in one call (None: one at a time)."""
        return None

    # -- writes ------------------------------------------------------------------------------

    def put(self, path: str, data: Payload, sync_directory: bool, expect: Expect) -> Operation:
        """The operation that replaces `path` (its new generation, or None); `expect` is
        honoured where the driver is `capabilities.conditional` (ConflictError)."""
        return functools.partial(_pipe, self, path, joined(data))

    def delete(self, path: str, expect: Expect) -> Operation:
        return functools.partial(_remove, self, path)

    def sync(self, paths: Sequence[str], root: str) -> list[tuple[str, Operation]]:
        """What makes the writes of `paths` durable: (the path it concerns, the operation)."""
        return []

    def delete_tree(self, path: str) -> Operation | None:
        """One operation deleting everything below `path`, how many objects (None: key by key)."""
        return None

    def move_tree(self, old: str, new: str) -> Operation | None:
        """One operation moving everything below `old` to `new`, how many (None: key by key)."""
        return None

    def delete_paths(self, seconds: float | None, paths: Sequence[str]) -> None:
        """(`capabilities.bulk_deletes`) Delete many objects in one request."""
        self.call(seconds, "rm", list(paths))

    def copy(self, seconds: float | None, path: str, target: str) -> None:
        """Copy one object to `target` (server-side where the filesystem can)."""
        self.call(seconds, "cp_file", path, target)


def _pipe(driver: Driver, path: str, data: bytes, seconds: float | None) -> None:
    driver.call(seconds, "pipe_file", path, data)


def _remove(driver: Driver, path: str, seconds: float | None) -> bool:
    with contextlib.suppress(FileNotFoundError):
        driver.call(seconds, "rm_file", path)
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
