"""Operations on every key below a prefix (a node of the hierarchy): deleting a node and
moving one. Local stores do each with one directory operation; object stores list the keys,
then delete them in bulk (S3: 1000 per request) or copy them server-side one by one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, TypeVar

import fsspec

from . import local
from .observe import DELETE, PUT

T = TypeVar("T")

REQUESTS_AT_ONCE = 16  # deletes or copies in flight on stores without bulk requests


class Store(Protocol):
    """What these operations use of a `zarrfs.store.Store`."""

    fs: fsspec.AbstractFileSystem
    is_local: bool
    is_s3: bool
    commits: bool
    confined: Any  # (local stores: `local.Root`)

    def path(self, key: str) -> str: ...
    def list(self, prefix: str = "") -> Iterator[str]: ...
    def delete(self, key: str) -> None: ...
    def check_writable(self, key: str) -> None: ...
    def call(self, key: str, operation: Callable[[float | None], T], *,
             missing_ok: bool = True, kind: str = ...) -> T | None: ...
    def fs_call(self, seconds: float | None, method: str, *args: Any, **kwargs: Any) -> Any: ...


def delete_prefix(store: Store, prefix: str) -> int:
    """Delete every key below `prefix` (a node: its chunks, shards and metadata); how many
    there were (locally: the directory is removed). Object stores: one listing, then one
    bulk request per 1000 keys on S3, one delete per key elsewhere."""
    store.check_writable(prefix)
    if store.commits:  # (Icechunk: the node's tree deleted in the session, committed)
        return store.call(prefix, lambda s: store.fs_call(s, "remove_prefix", store.path(prefix)),
                          missing_ok=False, kind=DELETE) or 0
    if store.confined is not None:
        root = store.confined  # (never through a link leading outside)
        return store.call(prefix, lambda s: local.remove_tree(root, store.path(prefix)), kind=DELETE) or 0
    store.fs.invalidate_cache(store.path(prefix))
    keys = [key for key in store.list(prefix) if key != prefix]
    if store.is_s3:
        for start in range(0, len(keys), 1000):
            paths = [store.path(key) for key in keys[start : start + 1000]]
            store.call(prefix, lambda s, paths=paths: store.fs_call(s, "rm", paths), kind=DELETE)  # type: ignore[misc]
    else:
        with ThreadPoolExecutor(REQUESTS_AT_ONCE, thread_name_prefix="delete") as requests:
            list(requests.map(store.delete, keys))
    store.fs.invalidate_cache(store.path(prefix))
    return len(keys)


def swap_prefixes(store: Store, old: str, new: str) -> bool:
    """Swap what is below `old` and below `new` (both held) in one step, where the store can:
    a local filesystem with renameat2's RENAME_EXCHANGE. False elsewhere (NFS, object stores,
    Icechunk), and nothing changed."""
    store.check_writable(new)
    if store.confined is None or store.commits:
        return False
    root = store.confined
    return bool(store.call(new, lambda s: local.exchange(root, store.path(old), store.path(new)),
                           missing_ok=False, kind=PUT))


def move_prefix(store: Store, old: str, new: str) -> int:
    """Move every key below `old` to below `new` (which must hold nothing); how many were
    moved. Locally one rename; on object stores a copy of each key (server-side where the
    store can), then `delete_prefix(old)`."""
    store.check_writable(new)
    if store.commits:  # (Icechunk: copied and deleted in the session, one commit)
        return store.call(new, lambda s: store.fs_call(s, "move_prefix", store.path(old), store.path(new)),
                          missing_ok=False, kind=PUT) or 0
    if store.confined is not None:
        # (never through a link leading outside; a link at `old` moves itself)
        root = store.confined
        store.call(new, lambda s: local.move(root, store.path(old), store.path(new)),
                   missing_ok=False, kind=PUT)
        return 1
    store.fs.invalidate_cache(store.path(old))
    keys = [key for key in store.list(old) if key != old]

    def copy(key: str) -> None:
        target = new + key[len(old):]
        store.call(key, lambda s: store.fs_call(s, "cp_file", store.path(key), store.path(target)),
                   missing_ok=False, kind=PUT)

    with ThreadPoolExecutor(REQUESTS_AT_ONCE, thread_name_prefix="copy") as requests:
        list(requests.map(copy, keys))
    delete_prefix(store, old)
    store.fs.invalidate_cache(store.path(new))
    return len(keys)
