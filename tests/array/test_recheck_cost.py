"""The cost of `-o recheck=open`, proven by the mount-wide counters: reopening an unchanged
array reads no chunk again; after another writer changed one chunk, that one chunk, and only
it, is fetched and decoded again. The mount's own writes are never taken for another
writer's."""

from __future__ import annotations

import os
import shutil
from typing import Any

import numpy as np
import pytest

from tests.helpers.recheck_mounts import (
    DTYPE,
    ITEM,
    SHAPE,
    VALUES,
    Backend,
    block,
    chunk,
    data,
    grown,
    npy,
    rechecked,
    seen_through_outage,
    stats,
)

pytestmark = pytest.mark.skipif(
    not os.path.exists("/dev/fuse") or shutil.which("fusermount3") is None,
    reason="needs FUSE (/dev/fuse and fusermount3)",
)


# -- 5. the cost: nothing read again but what changed ----------------------------------------


def test_reopening_reads_again_only_the_chunk_that_changed(backend: Backend,
                                                           mount_array: Any) -> None:
    backend.create("c")
    mount = mount_array(backend.url("c"), backend.mount_options)
    assert np.array_equal(data(mount), VALUES)
    first = stats(mount)
    assert first["chunks_decoded"] == 16

    def reopen_unchanged() -> None:  # `data` (page cache) and a chunk file (read by the daemon each time)
        assert np.array_equal(data(mount), VALUES)
        assert np.array_equal(chunk(mount, 1, 2), block(VALUES, 1, 2))

    delta = rechecked(mount, first, reopen_unchanged, rounds=10, rechecks=20)
    unchanged = stats(mount)
    assert delta["chunks_decoded"] == 0 and delta["bytes_fetched"] == 0, delta
    assert delta["chunks_changed_outside"] == 0

    expected = VALUES.copy()
    backend.writer("c")[8:16, 16:24] = expected[8:16, 16:24] = 7

    def reopen_changed() -> None:
        assert np.array_equal(data(mount), expected)
        for i in range(4):
            for j in range(4):
                assert np.array_equal(chunk(mount, i, j), block(expected, i, j))

    seen_through_outage(mount, reopen_changed)
    changed = stats(mount)
    delta = grown(unchanged, changed)
    assert delta["chunks_changed_outside"] == 1, delta
    assert delta["chunks_decoded"] == 1, delta
    assert delta["bytes_fetched"] == backend.stored_size("c", "c/1/2"), delta

    for _ in range(5):
        assert np.array_equal(data(mount), expected)
    delta = grown(changed, stats(mount))
    assert delta["chunks_decoded"] == 0 and delta["chunks_changed_outside"] == 0, delta


# -- 6. the mount's own writes ---------------------------------------------------------------


def test_own_writes_are_not_taken_for_outside_changes(backend: Backend, mount_array: Any) -> None:
    backend.create("w")
    mount = mount_array(backend.url("w"), backend.mount_options)
    assert np.array_equal(data(mount), VALUES)
    before = stats(mount)
    expected = VALUES.copy()
    expected[3] = np.arange(100, 132, dtype=DTYPE)
    with open(mount.data, "r+b", buffering=0) as f:
        f.seek(3 * SHAPE[1] * ITEM)
        f.write(expected[3].tobytes())
        os.fsync(f.fileno())
    assert np.array_equal(backend.writer("w")[...], expected)  # stored
    expected[20:24, 10:14] = 5  # and one not yet written back when reopened
    with open(mount.chunk("c/2/1"), "r+b", buffering=0) as f:
        block_values = block(expected, 2, 1)
        f.write(block_values.tobytes())

    def reopen() -> None:  # (four opens, four rechecks)
        assert np.array_equal(data(mount), expected)
        assert np.array_equal(npy(mount), expected)
        assert np.array_equal(chunk(mount, 0, 1), block(expected, 0, 1))
        assert np.array_equal(chunk(mount, 2, 1), block(expected, 2, 1))

    delta = rechecked(mount, before, reopen, rounds=3, rechecks=12)
    assert delta["chunks_changed_outside"] == 0, delta
    assert delta["chunks_decoded"] == 0, delta  # what it wrote stays cached
    assert delta["rechecks"] >= 12 and delta["write_conflicts"] == 0
    assert mount.unmount() == 0
    assert np.array_equal(backend.writer("w")[...], expected)
