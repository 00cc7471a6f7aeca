"""Writes to the store itself (`Store.put` and `delete`): the request each kind of store
makes of a put or delete, conditional (`expect`: the generation the caller read; None: the
key must not exist) where the store can be, and what makes a batch durable (`sync`)."""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterable
from typing import Any, Final, Protocol, TypeVar

from . import fetching, local, objects
from .observe import SYNC
from .values import Payload, pieces

T = TypeVar("T")
Operation = Callable[[float | None], Any]


# Passed as `expect` to put or delete: write whatever is stored now.
class _Any:
    def __repr__(self) -> str:
        return "ANY"


ANY: Final = _Any()
Expect = str | None | _Any


class Store(fetching.Store, Protocol):
    """What of a `core.Store` this needs: what reads need, and whether syncs are commits."""

    @property
    def commits(self) -> bool: ...


def put(store: Store, key: str, data: Payload, sync_directory: bool, expect: Expect) -> Operation:
    """The operation that puts `data` at `key` (its new generation, or None)."""
    path = store.path(key)
    if store.commits:
        return functools.partial(on_branch, store, "put_if", path, expect, data=_joined(data),
                                 commit=sync_directory)
    if isinstance(expect, _Any):
        if store.is_local:
            return lambda s: local.write_atomically(store.confined, path, data, sync_directory)
        return functools.partial(_pipe, store, path, _joined(data))
    wanted: str | None = expect
    if store.is_local:
        return lambda s: local.replace_if(store.confined, path, data, sync_directory, wanted)
    for conditional, put_if in ((store.is_s3, objects.s3_put), (store.is_gcs, objects.gcs_put),
                                (store.is_azure, objects.azure_put)):
        if conditional:
            return functools.partial(put_if, store.fs, path=path, data=_joined(data), expect=wanted)
    return functools.partial(_pipe, store, path, _joined(data))  # (not conditional: HTTP, references)


def delete(store: Store, key: str, expect: Expect) -> Operation:
    """The operation that deletes `key`."""
    path = store.path(key)
    if store.commits:
        return lambda s: on_branch(store, "delete_if", path, expect, s)
    if not isinstance(expect, _Any):
        wanted: str | None = expect
        if store.is_local:
            return lambda s: local.delete_if(store.confined, path, wanted)
        for conditional, delete_if in ((store.is_s3, objects.s3_delete), (store.is_gcs, objects.gcs_delete),
                                       (store.is_azure, objects.azure_delete)):
            if conditional:
                return functools.partial(delete_if, store.fs, path=path, expect=wanted)
    if store.is_local:
        return lambda s: local.delete(store.confined, path)
    return lambda s: _remove(store, s, path)


def on_branch(store: Store, method: str, path: Any, expect: Expect, s: float | None, **kw: Any) -> Any:
    """A put, delete or commit of a store that commits at syncs (an Icechunk branch)."""
    checked = not isinstance(expect, _Any)
    return store.fs_call(s, method, path, expect if checked else None, check=checked, **kw)


def sync_local(store: Store, keys: Iterable[str]) -> None:
    """fsync the directories of `keys` (local puts made without `sync_directory`)."""
    for directory in sorted({os.path.dirname(key) for key in keys}):
        store.call(directory, functools.partial(_fsync, store.path(directory)), kind=SYNC)


def _fsync(directory: str, seconds: float | None) -> None:
    local.fsync_directory(directory)


def _pipe(store: Store, path: str, data: bytes, seconds: float | None) -> None:
    store.fs_call(seconds, "pipe_file", path, data)


def _remove(store: Store, seconds: float | None, path: str) -> bool:
    with contextlib.suppress(FileNotFoundError):
        store.fs_call(seconds, "rm_file", path)
    return True


def _joined(data: Payload) -> bytes:
    return b"".join(pieces(data))
