"""Other writers' new values, seen through a mount with `-o recheck=open` (the default).

zarr-python and TensorStore write the store directly while it is mounted (a local directory,
and S3 through a local moto server). With `open` (close-to-open, as NFS promises) a file of
the array opened after the change shows it: `data`, `data.npy` and chunk files, new values
in existing chunks (also one inner chunk of a shard), a chunk deleted because it became all
fill; a change noticed through one file shows in the others.
"""

from __future__ import annotations

import os
import shutil
from typing import Any

import numpy as np
import pytest

from tests.helpers.recheck_mounts import (
    CHUNK,
    DTYPE,
    VALUES,
    Backend,
    block,
    chunk,
    data,
    grown,
    npy,
    read,
    stats,
)

pytestmark = pytest.mark.skipif(
    not os.path.exists("/dev/fuse") or shutil.which("fusermount3") is None,
    reason="needs FUSE (/dev/fuse and fusermount3)",
)


# -- 1. new values written by another writer -------------------------------------------------


def test_outside_writes_are_seen_after_reopen(backend: Backend, mount_array: Any) -> None:
    """zarr-python rewrites chunks the mount has read (the daemon caches them and `data` is in
    the page cache), one of them to all fill (so zarr-python deletes it): `data` reopened shows
    the new values, and so do the chunk files; a chunk file reopened first notices a change
    itself. Each change is counted once."""
    backend.create("a")
    mount = mount_array(backend.url("a"), backend.mount_options)
    assert np.array_equal(data(mount), VALUES)
    assert np.array_equal(data(mount), VALUES)  # reopened unchanged: from the caches
    assert np.array_equal(chunk(mount, 1, 2), block(VALUES, 1, 2))
    before = stats(mount)
    writer = backend.writer("a")
    expected = VALUES.copy()
    writer[8:16, 16:24] = expected[8:16, 16:24] = 7
    writer[24:32, 0:8] = expected[24:32, 0:8] = 0
    writer[16:24, 8:12] = expected[16:24, 8:12] = 65535
    assert np.array_equal(data(mount), expected)
    assert np.array_equal(chunk(mount, 1, 2), block(expected, 1, 2))
    assert np.array_equal(chunk(mount, 3, 0), block(expected, 3, 0))
    assert np.array_equal(chunk(mount, 2, 1), block(expected, 2, 1))

    # A chunk file reopened first notices the next change itself (one not read again since
    # the mount last looked at the whole array).
    writer[0:8, 0:8] = expected[0:8, 0:8] = 8
    assert np.array_equal(chunk(mount, 0, 0), block(expected, 0, 0))
    after = grown(before, stats(mount))
    assert after["chunks_changed_outside"] == 4, after  # each change noticed once
    assert after["errors"] == 0


def test_outside_write_is_seen_by_data_npy_reopened(backend: Backend, mount_array: Any) -> None:
    backend.create("h")
    mount = mount_array(backend.url("h"), backend.mount_options)
    assert np.array_equal(npy(mount), VALUES)
    assert np.array_equal(npy(mount), VALUES)
    expected = VALUES.copy()
    backend.writer("h")[0:8, 24:32] = expected[0:8, 24:32] = 11
    assert np.array_equal(npy(mount), expected)


@pytest.mark.fast
@pytest.mark.parametrize("noticer", ["chunk", "data.npy", "data"])
def test_a_change_noticed_through_one_file_shows_in_the_others(noticer: str, local: Backend,
                                                               mount_array: Any) -> None:
    """`data` and data.npy keep their pages in the kernel's page cache. When the open of
    another file of the array (a chunk file, or the other of the two) is what notices another
    writer's change, the one reopened next must not serve its old pages: its own recheck
    finds nothing new by then, the change having been taken already."""
    local.create("o")
    mount = mount_array(local.url("o"))
    readers = {"chunk": lambda: chunk(mount, 1, 2), "data.npy": lambda: block(npy(mount), 1, 2),
               "data": lambda: block(data(mount), 1, 2)}
    for read_it in [*readers.values(), *readers.values()]:  # cached, pages and all
        assert np.array_equal(read_it(), block(VALUES, 1, 2))
    local.writer("o")[8:16, 16:24] = 7
    assert np.array_equal(readers[noticer](), np.full((CHUNK, CHUNK), 7))
    stale = [name for name, read_it in readers.items()
             if not np.array_equal(read_it(), np.full((CHUNK, CHUNK), 7))]
    assert not stale, f"after {noticer} was reopened, {stale} reopened still show the old values"


def test_outside_writes_by_tensorstore_are_seen(backend: Backend, mount_array: Any) -> None:
    backend.create("t")
    mount = mount_array(backend.url("t"), backend.mount_options)
    assert np.array_equal(data(mount), VALUES)
    assert np.array_equal(chunk(mount, 3, 3), block(VALUES, 3, 3))
    before = stats(mount)
    expected = VALUES.copy()
    expected[20:30, 2:30] = 4242
    backend.tensorstore("t")[20:30, 2:30].write(expected[20:30, 2:30]).result()
    assert np.array_equal(data(mount), expected)
    assert np.array_equal(chunk(mount, 3, 3), block(expected, 3, 3))
    assert grown(before, stats(mount))["chunks_changed_outside"] == 8  # rows 2-3 of chunks


def test_tensorstore_writing_one_inner_chunk_of_a_shard_is_seen(backend: Backend,
                                                                 mount_array: Any) -> None:
    """Shards of 2 x 2 chunks (chunk files are shards): TensorStore rewrites one inner chunk,
    so one shard object changes."""
    backend.create("s", shards=(2 * CHUNK, 2 * CHUNK))
    mount = mount_array(backend.url("s"), backend.mount_options)
    assert np.array_equal(data(mount), VALUES)
    shard = np.frombuffer(read(mount.chunk("c/1/0")), DTYPE).reshape(16, 16)
    assert np.array_equal(shard, VALUES[16:32, 0:16])
    before = stats(mount)
    expected = VALUES.copy()
    expected[24:32, 8:16] = 999  # inner chunk (1, 1) of shard (1, 0)
    backend.tensorstore("s")[24:32, 8:16].write(expected[24:32, 8:16]).result()
    shard = np.frombuffer(read(mount.chunk("c/1/0")), DTYPE).reshape(16, 16)
    assert np.array_equal(shard, expected[16:32, 0:16])
    assert np.array_equal(data(mount), expected)
    assert np.array_equal(npy(mount), expected)
    assert grown(before, stats(mount))["chunks_changed_outside"] == 1
