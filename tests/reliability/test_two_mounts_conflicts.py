"""Two writers of one stored object: two zarrfs mounts of the same array (or a mount and
zarr-python), on a local directory and on S3 (a moto server on 127.0.0.1), plain chunks and
shards. Every write-back is a compare-and-swap, so neither writer may lose the other's
updates, even though each holds a stale copy of the chunk in its cache.

The array: 16 x 16 int32 (fill -1), plain 8 x 8 chunks, or one 16 x 16 shard of 8 x 8 inner
chunks. Each round both mounts first read the whole array through `data` (direct_io, so the
read reaches the daemon, which caches the chunks: from the second round on that copy is stale),
then write elements with pwrite and fsync:

* plain: A writes elements of chunk (0, 0) (rows 0-3), B other elements of it (rows 4-7);
* sharded: A writes elements of inner chunk (0, 0) (rows 0-3), B other elements of it (rows
  4-7) and elements of inner chunk (0, 1): every round, both rewrite the one shard.

Conflicts: with plain chunks each write-back finds the chunk replaced by the other mount (its
cached copy is stale), so every round makes them. A shard's write-back reads the stored shard
just before its put, so a conflict needs another writer between that read and the put: on odd
rounds a gate makes one, deterministically (no sleeps). Locally the test holds `flock` on the
shard file (zarrfs's CAS takes it), lets both mounts' fsyncs read the shard and queue on the
lock (seen in /proc/locks), and lets go: whichever puts second must conflict. On S3 the moto
server holds B's conditional PUT until A's fsync has returned, then lets it go: If-Match fails.

After the rounds both are unmounted and zarr-python reads the store: every element holds its
last written value (0 lost updates), and the conflicts (`zarrfs stats`, summed over the
mounts) are > 0.

Also zarr-python on the other side. Plain: each round zarr-python rewrites all of chunk (0, 0)
and then the mount (whose cached chunk is stale) writes two elements of it: the store must
hold zarr-python's chunk with the mount's two elements, never the mount's stale copy.
Sharded: zarr-python rewrites all of inner chunk (0, 1) each round, the mount writes elements
of inner chunk (0, 0) of the same shard; on odd rounds zarr-python's write lands between the
mount's read of the shard and its put (the gate again). Both must survive.

The figures (rounds, lost updates, conflicts) are printed at the end of each test and, when
ZARRFS_STATS names a file, appended to it as JSON lines.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.mounting import mounted
from tests.helpers.two_mount_targets import (
    ROUNDS,
    Target,
    a_elements,
    b_elements,
    figures_line,
    make_gate,
    two_writers,
    values,
)
from tests.helpers.two_writers import INITIAL, Gate, Writer, in_thread, lost

pytestmark = pytest.mark.skipif(
    not os.path.exists("/dev/fuse") or shutil.which("fusermount3") is None,
    reason="needs FUSE (/dev/fuse and fusermount3)",
)
zarr = pytest.importorskip("zarr")


# -- the tests -----------------------------------------------------------------------------------


def test_two_mounts_write_one_chunk(target: Target, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    request: pytest.FixtureRequest) -> None:
    expected = INITIAL.copy()
    gate = make_gate(target, monkeypatch)
    gated_rounds = 0
    with two_writers(target.source, target.mount_options, tmp_path) as (a, b):
        mount_a, mount_b = a.mount, b.mount
        for r in range(ROUNDS):
            a.read_all()
            b.read_all()
            writes_a = values(1, r, a_elements(r))
            writes_b = values(2, r, b_elements(r, target.sharded))
            a.write(writes_a)
            b.write(writes_b)
            if target.sharded and r % 2 == 1:
                gated_rounds += 1
                both_through_gate(target, gate, a, b)
            else:
                a.fsync()
                b.fsync()
            for where, value in {**writes_a, **writes_b}.items():
                expected[where] = value
        seen_a, seen_b = a.read_all(), b.read_all()
        conflicts_a = int(a.stats()["write_conflicts"])
        conflicts_b = int(b.stats()["write_conflicts"])
    assert mount_a.process.returncode == 0, mount_a.log()
    assert mount_b.process.returncode == 0, mount_b.log()
    stored = target.read()
    record = {"rounds": ROUNDS, "gated_rounds": gated_rounds, "lost_updates": lost(stored, expected),
              "conflicts_a": conflicts_a, "conflicts_b": conflicts_b,
              "stale_in_a_at_end": lost(seen_a, expected), "stale_in_b_at_end": lost(seen_b, expected)}
    figures_line(request, "two mounts", record)
    assert record["lost_updates"] == 0, (record, stored, expected)
    assert conflicts_a + conflicts_b > 0, record
    if target.sharded:
        assert conflicts_a + conflicts_b >= gated_rounds, record
    else:  # every write-back but the first finds the chunk replaced by the other mount
        assert conflicts_a + conflicts_b >= 2 * ROUNDS - 2, record
    for mount in (mount_a, mount_b):
        assert "Traceback" not in mount.log(), mount.log()


def both_through_gate(target: Target, gate: Gate, a: Writer, b: Writer) -> None:
    """Both mounts write the shard back, B's read of it before A's put, B's put after."""
    with gate.closed():
        if target.kind == "local":  # both read the shard, then queue on its lock
            joins = [in_thread(a.fsync), in_thread(b.fsync)]
            gate.wait_held(2)
        else:  # B's put waits at the server while A writes the shard back
            joins = [in_thread(b.fsync)]
            gate.wait_held(1)
            a.fsync()
        gate.release()
        for join in joins:
            join()


def test_mount_and_zarr_python_write_one_object(target: Target, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch,
                                                request: pytest.FixtureRequest) -> None:
    """(a) zarr-python writes whole chunks; the mount writes elements of the same stored
    object (the same plain chunk, or another inner chunk of the same shard)."""
    expected = INITIAL.copy()
    gate = make_gate(target, monkeypatch)
    gated_rounds = 0
    other = target.open_zarr()
    # zarr-python's whole chunk: chunk (0, 0) (plain), inner chunk (0, 1) (sharded).
    zp_box = (slice(0, 8), slice(8, 16)) if target.sharded else (slice(0, 8), slice(0, 8))
    with mounted(target.source, tmp_path / "m", target.mount_options) as mount:
        writer = Writer("M", mount).open()
        try:
            for r in range(ROUNDS):
                writer.read_all()  # stale after zarr-python's write
                block = np.full((8, 8), 3_000_000 + r * 100, "<i4") + np.arange(64, dtype="<i4").reshape(8, 8)
                writes = values(1, r, a_elements(r))
                writer.write(writes)
                if target.sharded and r % 2 == 1:  # zarr-python between the read and the put
                    gated_rounds += 1
                    with gate.closed():
                        join = in_thread(writer.fsync)
                        gate.wait_held(1)
                        other[zp_box] = block
                        gate.release()
                        join()
                else:
                    other[zp_box] = block  # before the mount's write-back: its cache is stale
                    writer.fsync()
                expected[zp_box] = block
                for where, value in writes.items():
                    expected[where] = value
            conflicts = int(writer.stats()["write_conflicts"])
        finally:
            writer.close()
    assert mount.process.returncode == 0, mount.log()
    stored = target.read()
    record = {"rounds": ROUNDS, "gated_rounds": gated_rounds, "lost_updates": lost(stored, expected),
              "conflicts": conflicts}
    figures_line(request, "mount and zarr-python", record)
    assert record["lost_updates"] == 0, (record, stored, expected)
    assert conflicts >= (gated_rounds if target.sharded else ROUNDS - 1), record
    assert "Traceback" not in mount.log(), mount.log()
