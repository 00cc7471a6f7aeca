"""What each file's bytes depend on (`tree.file_revisions`, the server's ETags), without FUSE or
HTTP: a write to one array moves the revisions of its files and of the group files showing
it, never another group's or another array's; reads move nothing; a metadata file's revision
is its bytes; an array opened again is another revision; a file being written is never the
same twice."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

import numpy as np
import pytest
import zarr

from zarrfs.array import Shared
from zarrfs.formats import discover
from zarrfs.grid import Box
from zarrfs.store import Store
from zarrfs.tree import CHUNK, DATA, GROUP, GROUP_VIEW, HEADER, METADATA, UPLOAD, Ref, Tree
from zarrfs.views.array_dir import ViewSettings

pytestmark = pytest.mark.fast


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    root = zarr.open_group(tmp_path / "g.zarr", mode="w", zarr_format=3)
    for group in ("one", "two"):
        for name in ("x", "y"):
            root.require_group(group).create_array(name, shape=(8, 8), chunks=(4, 4), dtype="u1")[...] = 1
    store = Store.open(str(tmp_path / "g.zarr"), writable=True)
    found = discover(store.get, "")
    assert found is not None
    return Tree(store, found, Shared(1 << 20, 1), ViewSettings())


def revisions(tree: Tree, refs: list[Ref]) -> list[object]:
    for ref in refs:  # (their bytes read, as a GET reads them)
        view = tree.file(ref)
        view.read(0, view.size)
    return [tree.file_revisions.of(ref) for ref in refs]


def test_a_write_moves_its_arrays_files_and_the_groups_showing_it(tree: Tree) -> None:
    x = [Ref("one/x", DATA), Ref("one/x", HEADER, ("data.npy",)), Ref("one/x", CHUNK, ("c", "1", "1"))]
    others = [Ref("one/y", DATA), Ref("two/x", DATA), Ref("two", GROUP_VIEW, ("data.nc",)),
              Ref("one/x", METADATA, ("zarr.json",))]
    shown = [Ref("one", GROUP_VIEW, ("data.nc",)), Ref("one", GROUP_VIEW, ("data.h5",))]
    before = revisions(tree, x + others + shown)
    assert revisions(tree, x + others + shown) == before  # (reads move nothing)
    array = tree.opened_array("one/x")
    assert array is not None
    array.write(Box((0, 0), (1, 1)), np.full((1, 1), 9, "u1"))
    after = revisions(tree, x + others + shown)
    moved = [before[n] != after[n] for n in range(len(before))]
    assert moved == [True] * len(x) + [False] * len(others) + [True] * len(shown)
    tree.close()


def test_metadata_is_its_bytes_and_an_array_opened_again_is_new(tree: Tree) -> None:
    metadata = Ref("one/x", METADATA, ("zarr.json",))
    view = tree.file(metadata)
    revision = tree.file_revisions.of(metadata)
    assert revision == ("bytes", hashlib.blake2b(bytes(view.read(0, view.size)), digest_size=16).hexdigest())
    data = revisions(tree, [Ref("one/x", DATA)])[0]
    tree.forget_below("one/x", flush=True)
    assert revisions(tree, [Ref("one/x", DATA)])[0] != data  # (another ZarrArray: other counters)
    tree.close()


def test_an_upload_is_new_at_each_write_alone(tree: Tree) -> None:
    """A `.npy` being written keeps its revision between writes (davfs2 LOCKs a new name, asks
    its ETag, then PUTs with If-Match that ETag), and takes a new one at each write."""
    assert tree.lookup(Ref("", GROUP), "one") == Ref("one", GROUP)
    upload = tree.begin_upload("one", "z.npy")
    assert upload == Ref("one", UPLOAD, ("z.npy",))
    empty = tree.file_revisions.of(upload)
    assert tree.file_revisions.of(upload) == empty
    npy = io.BytesIO()
    np.save(npy, np.arange(4, dtype="<u2"))
    written = npy.getvalue()
    tree.file(upload).write(0, written[:64])
    first = tree.file_revisions.of(upload)
    assert first != empty and tree.file_revisions.of(upload) == first
    tree.file(upload).write(64, written[64:])
    assert tree.file_revisions.of(upload) != first
    tree.upload_closed(upload)
    tree.close()
