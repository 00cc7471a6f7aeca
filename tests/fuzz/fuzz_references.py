"""Fuzz target: reference sets (kerchunk JSON). The input is the bytes of a `refs.json`
beside a data file in a directory of its own; it is opened as a mount opens a source
(`Store.open`: the checks of zarrfs.store.references.filesystem, fsspec's ReferenceFileSystem, the
policy on targets), its keys listed, sized and read, and the node at its root discovered and
opened (tests/fuzz/nodes.py)."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

from zarrfs.store import Store
from zarrfs.store.references.filesystem import GuardedReferenceFileSystem

from .common import expect_typed
from .nodes import visit

_FOLDER = Path(tempfile.mkdtemp(prefix="zarrfs-fuzz-refs-"))
atexit.register(shutil.rmtree, _FOLDER, True)
(_FOLDER / "data.bin").write_bytes(bytes(range(256)) * 4)
SET = _FOLDER / "refs.json"
# The tests' and kerchunk's reference sets name their targets so (relative to the set).
DATA_NAME = "data.bin"


def read_keys(store: Store) -> None:
    for key in list(store.list())[:64]:
        expect_typed(lambda k=key: store.size(k))
        expect_typed(lambda k=key: store.get(k))
    expect_typed(lambda: store.list_dirs(""))


def explore(store: Store) -> None:
    from zarrfs.formats import discover

    node = discover(store.get, "")
    if node is not None:
        visit(node)


def fuzz_one(data: bytes) -> None:
    SET.write_bytes(data)
    try:
        store = None

        def open_set() -> None:
            nonlocal store
            store = Store.open(str(SET), read_only=True)

        expect_typed(open_set)
        if store is not None:
            opened: Store = store
            expect_typed(lambda: read_keys(opened))
            expect_typed(lambda: explore(opened))
    finally:
        # fsspec keeps every filesystem made, keyed by its arguments (here, the references).
        GuardedReferenceFileSystem.clear_instance_cache()
