"""Operations on every key below a prefix (a node of the hierarchy): deleting a node and
moving one. A driver that can does each in one operation (local files: a directory operation;
Icechunk: in its session); elsewhere the keys are listed, then deleted in bulk (S3: 1000 per
request) or one by one, or copied server-side one by one.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from .base import BaseStore
from .observe import DELETE, PUT

REQUESTS_AT_ONCE = 16  # deletes or copies in flight on stores without bulk requests


def delete_prefix(store: BaseStore, prefix: str) -> int:
    """Delete every key below `prefix` (a node: its chunks, shards and metadata); how many
    there were (locally: the directory is removed). Object stores: one listing, then one
    bulk request per 1000 keys on S3, one delete per key elsewhere."""
    store.check_writable(prefix)
    whole = store.driver.delete_tree(store.path(prefix))
    if whole is not None:
        return store.call(prefix, whole, missing_ok=False, kind=DELETE) or 0
    store.driver.forget(store.path(prefix))
    keys = [key for key in store.list(prefix) if key != prefix]
    bulk = store.capabilities.bulk_deletes
    if bulk:
        for start in range(0, len(keys), bulk):
            paths = [store.path(key) for key in keys[start : start + bulk]]
            store.call(prefix, lambda s, paths=paths: store.driver.delete_paths(s, paths), kind=DELETE)  # type: ignore[misc]
    else:
        with ThreadPoolExecutor(REQUESTS_AT_ONCE, thread_name_prefix="delete") as requests:
            list(requests.map(store.delete, keys))
    store.driver.forget(store.path(prefix))
    return len(keys)


def swap_prefixes(store: BaseStore, old: str, new: str) -> bool:
    """Swap what is below `old` and below `new` (both held) in one step, where the driver can:
    a local filesystem with renameat2's RENAME_EXCHANGE. False elsewhere (NFS, object stores,
    Icechunk), and nothing changed."""
    store.check_writable(new)
    return store.local_files is not None and store.local_files.exchange(old, new)


def move_prefix(store: BaseStore, old: str, new: str) -> int:
    """Move every key below `old` to below `new` (which must hold nothing); how many were
    moved. Locally one rename; on object stores a copy of each key (server-side where the
    store can), then `delete_prefix(old)`."""
    store.check_writable(new)
    whole = store.driver.move_tree(store.path(old), store.path(new))
    if whole is not None:
        return store.call(new, whole, missing_ok=False, kind=PUT) or 0
    store.driver.forget(store.path(old))
    keys = [key for key in store.list(old) if key != old]

    def copy(key: str) -> None:
        target = new + key[len(old):]
        store.call(key, lambda s: store.driver.copy(s, store.path(key), store.path(target)),
                   missing_ok=False, kind=PUT)

    with ThreadPoolExecutor(REQUESTS_AT_ONCE, thread_name_prefix="copy") as requests:
        list(requests.map(copy, keys))
    delete_prefix(store, old)
    store.driver.forget(store.path(new))
    return len(keys)
