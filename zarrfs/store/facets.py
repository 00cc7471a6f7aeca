"""What one family of stores does and the others do not, each as a facet: an object a driver
hands out (or None, where its family does not do it), as it hands out a batch of reads
(`driver.Driver.read_objects`). The base `Driver` and `Store` say only what every store does;
a caller that wants what one family does asks for its facet and handles None, never the
driver's class.

- `LocalFiles` (a store of local files, `Store.local_files`): files lent to the decoding
  processes (`opened`, `lend_directory`), reads that fill only from the page cache
  (`read_cached`...), the scans, swaps and space of its directories.
- `VersionHistory` (Icechunk, `Driver.versions`): the branches, tags and snapshots, and the
  generation of each key known from the snapshot followed.
- `Batches` (S3, Azure, `Driver.batches`): many objects, or many ranges of one, read in one
  call on the filesystem's loop.
- `CachedOnDisk` (a store a disk cache serves, `Store.cached_on_disk`): its entries, and
  what the cache says of itself.

A facet is found once, where its store is made (`Store.local_files` is an attribute): asking
for it on a hot path costs an attribute lookup, never a system call."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any, Protocol, TypeVar

from .values import Described, Opened

T = TypeVar("T")
Operation = Callable[[float | None], Any]
Mark = Callable[[], None]  # (`deadline.Answers.mark`: a batch marks each answer it gets)


class Keyed(Protocol):
    """The store a facet of one store serves (`base.BaseStore`): its root, the path of each
    key, and its operations under its deadline and observer."""

    root: str
    read_only: bool

    def path(self, key: str) -> str: ...

    def call(self, key: str, operation: Callable[[float | None], T], *, missing_ok: bool = ...,
             kind: str = ..., objects: int = ...) -> T | None: ...


class LocalFiles(Protocol):
    """What only a store of local files does (`capabilities.local_files`), by key below its
    root. Reads that fill `into` never wait on a disk: None where they would."""

    def writable(self) -> bool:
        """Whether this process may write below the root."""

    def read_cached(self, key: str, start: int, into: memoryview) -> str | None:
        """Fill `into` from `start` of `key` from the page cache: its generation, or None."""

    def read_whole_cached(self, key: str, into: memoryview) -> tuple[int, str | None] | None:
        """Fill the start of `into` with all of `key` from the page cache (it fits): its size
        and generation ((-1, None): not stored), or None."""

    def read_edge_cached(self, key: str, into: memoryview, *, at_end: bool) -> tuple[int, str] | None:
        """Fill `into` with the first (`at_end`: last) bytes of `key` from the page cache: its
        size and generation, or None."""

    def opened(self, key: str) -> Opened | None:
        """The file of `key` opened to be read whole elsewhere (a decoding process: the read
        costs the daemon no copy); None: not stored."""

    def lend_directory(self) -> int | None:
        """The root directory, opened for another process (a decoding process) to open the
        files below it itself with `open_below`, under the rules of the store's own opens
        (links refused there are refused to it); the caller closes it. None where it cannot."""

    def scanned(self, keys: Sequence[str]) -> dict[str, Described]:
        """What one scan of each directory holding `keys` says of them (those not stored are
        left out)."""

    def exchange(self, first: str, second: str) -> bool:
        """Swap what is below the keys `first` and `second` in one step (renameat2's
        RENAME_EXCHANGE); False where the filesystem cannot, and nothing changed."""

    def room(self) -> os.statvfs_result:
        """What the filesystem holding the root has room for."""

    def remove_stale_temporaries(self) -> int:
        """Delete the temporary files of atomic puts by processes that have died; how many."""


class VersionHistory(Protocol):
    """A store's versions (`capabilities.versions`, `capabilities.knows_generations`:
    Icechunk), by path, each request given the seconds it may take as a driver's are."""

    def names(self, seconds: float | None, kind: str) -> list[str]:
        """The branches, tags or snapshots (`kind`) there are now."""

    def log(self, seconds: float | None) -> bytes:
        """The mounted branch's commits, newest first, one a line."""

    def create(self, seconds: float | None, kind: str, name: str) -> None:
        """A new tag or branch at the mounted branch's head."""

    def known_generation(self, path: str) -> str:
        """The generation of `path` in the snapshot followed, without a request."""

    def resume(self, generations: Sequence[str]) -> None:
        """Take up from `generations` (those an earlier mount read, the last used first) where
        what changed since left keys as they were."""


class Batches(Protocol):
    """Many reads in one call (S3; Azure whole objects): each an operation of the driver's,
    marking each answer it gets (`mark`)."""

    def objects(self, paths: Sequence[str], mark: Mark) -> Operation:
        """Whole objects (a list of `Versioned`, None for those not stored)."""

    def ranges(self, path: str, pairs: Sequence[tuple[int, int]], mark: Mark) -> Operation | None:
        """Ranges (start, length) of one object (a list of `Versioned`); None: the service
        reads ranges one at a time."""


class CachedOnDisk(Protocol):
    """What a store a disk cache serves offers beside its reads (`disk_cache.DiskCachedStore`)."""

    def served_locally(self) -> bool:
        """Whether the latest reads were served from this machine without a request."""

    def stats(self) -> dict[str, float]:
        """The disk cache's figures, for the mount's stats."""

    def open(self, keys: Sequence[str], *, unchecked: dict[str, str] | None = None) -> dict[str, Opened]:
        """Those of `keys` the cache holds whole at the generation the mount may serve, as
        files opened to be read elsewhere (`Opened`: a decoding process reads and checks them);
        the others are left out. `unchecked`: as `Store.read_many`'s."""

    def whole(self, key: str) -> tuple[int, str] | None:
        """The size and generation of `key` where the cache holds all of it (reads of it cost
        no request, as a local file's)."""

    def confirm(self, unchecked: Mapping[str, str]) -> Future[set[str]]:
        """The keys of `unchecked` (from `read_many`) whose generation read was not current,
        once their checks answer."""
