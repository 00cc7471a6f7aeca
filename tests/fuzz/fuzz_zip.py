"""Fuzz target: zip archives (zarr-python's ZipStore, an RFC-9 `.ozx`, a store in one folder
of the zip). The input is the bytes of `archive.zip` in a directory of its own; it is opened
as a mount opens a source (`Store.open`: zarrfs.store.zipfiles.filesystem and zip_index, the central
directory parsed, the Zarr root found), its keys listed, sized and read (local headers,
inflating, CRC checks), and the node at its root discovered and opened (tests/fuzz/nodes.py)."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

from zarrfs.store import Store

from .common import expect_typed
from .fuzz_references import explore, read_keys

_FOLDER = Path(tempfile.mkdtemp(prefix="zarrfs-fuzz-zip-"))
atexit.register(shutil.rmtree, _FOLDER, True)
ARCHIVE = _FOLDER / "archive.zip"


def fuzz_one(data: bytes) -> None:
    ARCHIVE.write_bytes(data)
    store = None

    def open_archive() -> None:
        nonlocal store
        store = Store.open(str(ARCHIVE))

    expect_typed(open_archive)
    if store is not None:
        opened: Store = store
        expect_typed(lambda: read_keys(opened))
        expect_typed(lambda: explore(opened))
