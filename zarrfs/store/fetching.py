"""Reads from the store itself (`Store.read`, `read_ranges` and `read_many` without the disk
cache): the request each kind of store answers with the bytes and their generation."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, TypeVar

from . import local, objects
from .observe import GET, GET_RANGE
from .ranges import ByteRange
from .values import Versioned, as_bytes

T = TypeVar("T")
# Ranged reads of one object from stores without batched requests (GCS, HTTP, references,
# Icechunk): each range its own request, these many in flight across the mount.
_RANGE_REQUESTS = ThreadPoolExecutor(32, thread_name_prefix="ranges")


class Store(Protocol):
    """What of a `core.Store` this needs."""

    fs: Any
    is_local: bool
    is_s3: bool
    is_gcs: bool
    is_azure: bool
    reads_generations: bool
    disk_cache: Any
    answers: Any  # (`deadline.Answers`: batches mark each answer in it)
    confined: Any  # (local stores: the `local.Root` every open stays inside)

    def path(self, key: str) -> str: ...
    def read(self, key: str, byte_range: ByteRange | None = None) -> Versioned | None: ...
    def size(self, key: str) -> int | None: ...
    def get(self, key: str, byte_range: ByteRange | None = None) -> bytes | None: ...
    def fs_call(self, seconds: float | None, method: str, *args: Any, **kwargs: Any) -> Any: ...
    def call(self, key: str, operation: Callable[[float | None], T], *, missing_ok: bool = True,
             kind: str = ..., objects: int = 1) -> T | None: ...


def read(store: Store, key: str, byte_range: ByteRange | None = None) -> Versioned | None:
    """`Store.read` from the store."""
    path = store.path(key)
    start, length = (None, None) if byte_range is None else (byte_range.start, byte_range.length)
    kind = GET if byte_range is None else GET_RANGE
    fs = store.fs
    if store.is_local:
        # Plain system calls: fsspec's buffered file objects cost as much as decoding.
        return store.call(key, lambda s: local.read(store.confined, path, start, length), kind=kind)
    if store.is_s3:
        return store.call(key, lambda s: objects.s3_read(fs, s, path, start, length), kind=kind)
    if store.is_gcs:
        return store.call(key, lambda s: objects.gcs_read(fs, s, path, start, length), kind=kind)
    if store.is_azure:
        return store.call(key, lambda s: objects.azure_read(fs, s, path, start, length), kind=kind)
    if store.reads_generations:
        return store.call(key, lambda s: store.fs_call(s, "cat_versioned", path, start, length), kind=kind)
    data = store.get(key, byte_range)
    return None if data is None else Versioned(data, None)


def opened(store: Store, key: str) -> local.Opened | None:
    """A local store's file opened to be read whole elsewhere (a decoding process: the read
    costs the daemon no copy); None: not stored."""
    return store.call(key, lambda s: local.opened(store.confined, store.path(key)), kind=GET)


def read_ranges(store: Store, key: str, ranges: Sequence[ByteRange]) -> list[Versioned] | None:
    """`Store.read_ranges` from the store."""
    if store.is_s3 and len(ranges) > 1:
        path, pairs = store.path(key), [(r.start, r.length) for r in ranges]
        return store.call(key, lambda s: objects.s3_read_ranges(store.fs, s, path, pairs, store.answers.mark),
                          kind=GET_RANGE, objects=len(pairs))
    # (each range through `Store.read`, but under the disk cache, which asked for them)
    one = store.read if store.disk_cache is None else functools.partial(read, store)
    if store.is_local or len(ranges) <= 1:
        found = [one(key, byte_range) for byte_range in ranges]
    else:
        found = list(_RANGE_REQUESTS.map(functools.partial(one, key), ranges))
    return None if any(piece is None for piece in found) else [p for p in found if p is not None]


def read_many(store: Store, keys: Sequence[str]) -> list[Versioned | None]:
    """`Store.read_many` from the store."""
    batch = objects.s3_read_objects if store.is_s3 else objects.azure_read_objects if store.is_azure else None
    if batch is None or len(keys) <= 1:
        return [store.read(key) if store.disk_cache is None else read(store, key) for key in keys]
    paths = [store.path(key) for key in keys]
    found = store.call(keys[0], lambda s: batch(store.fs, s, paths, store.answers.mark), missing_ok=False,
                       kind=GET, objects=len(keys))
    return found or []  # (missing objects are None in the list)


def read_suffix(store: Store, key: str, length: int) -> bytes | None:
    """The last `length` bytes of `key` (fewer in a shorter object; None: not stored)."""
    size = store.size(key)
    if size is None:
        return None
    start = max(0, size - length)
    if store.disk_cache is not None:
        found = store.read(key, ByteRange(start, size - start))
        return None if found is None else as_bytes(found.data)
    return store.call(key, lambda s: store.fs_call(s, "cat_file", store.path(key), start=start, end=size),
                      kind=GET_RANGE)
