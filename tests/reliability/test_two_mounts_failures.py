"""Two writers of one stored object when one fails (tests/reliability/test_two_mounts_conflicts.py
has them both well): two zarrfs mounts of the same array, on a local directory and on S3.

SIGKILL of mount B half-way, while its write-back waits at the gate (it has read the shard or
chunk and is about to put): nothing A fsynced is lost, everything B fsynced before the kill is
in the store, and the elements of B's interrupted write hold the old or the new value. A
write-back over a chunk the other mount deleted stores the chunk again.

The figures (rounds, lost updates, conflicts) are printed at the end of each test and, when
ZARRFS_STATS names a file, appended to it as JSON lines.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
from pathlib import Path

import pytest

from tests.helpers.two_mount_targets import (
    ROUNDS,
    Target,
    a_elements,
    b_elements,
    figures_line,
    make_gate,
    make_target,
    two_writers,
    values,
)
from tests.helpers.two_writers import INITIAL, in_thread, lost

pytestmark = pytest.mark.skipif(
    not os.path.exists("/dev/fuse") or shutil.which("fusermount3") is None,
    reason="needs FUSE (/dev/fuse and fusermount3)",
)
zarr = pytest.importorskip("zarr")


KILL_AT = ROUNDS // 2


def test_sigkill_of_one_mount_loses_nothing_acknowledged(target: Target, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         request: pytest.FixtureRequest) -> None:
    """(b) B is killed half-way, while its write-back waits at the gate between its read of
    the stored object and its put; A goes on alone."""
    expected = INITIAL.copy()
    uncertain: dict[tuple[int, int], int] = {}  # B's interrupted write: old or new value
    gate = make_gate(target, monkeypatch)
    with two_writers(target.source, target.mount_options, tmp_path) as (a, b):
        mount_a, mount_b = a.mount, b.mount
        for r in range(ROUNDS):
            a.read_all()
            writes_a = values(1, r, a_elements(r))
            a.write(writes_a)
            a.fsync()
            for where, value in writes_a.items():
                expected[where] = value
            if r < KILL_AT:
                if r == KILL_AT - 1:
                    # Before B's write: every close in a forked child (the stats command)
                    # makes the kernel send FLUSH for B's open file, a write-back.
                    conflicts_b = int(b.stats()["write_conflicts"])
                b.read_all()
                writes_b = values(2, r, b_elements(r, target.sharded))
                b.write(writes_b)
                if r < KILL_AT - 1:
                    b.fsync()
                    for where, value in writes_b.items():
                        expected[where] = value
                    continue
                with gate.closed():
                    join = in_thread(b.fsync)
                    gate.wait_held(1)  # B has read the object and waits to put it
                    mount_b.process.send_signal(signal.SIGKILL)
                    mount_b.process.wait(timeout=20)
                with contextlib.suppress(OSError):
                    join()  # the dead mount fails the fsync
                uncertain = writes_b
        conflicts_a = int(a.stats()["write_conflicts"])
    assert mount_a.process.returncode == 0, mount_a.log()
    assert mount_b.process.returncode == -signal.SIGKILL
    stored = target.read()
    wrong = [(where, int(stored[where]), int(expected[where]), value) for where, value in uncertain.items()
             if stored[where] not in (expected[where], value)]
    landed = sum(1 for where, value in uncertain.items() if stored[where] == value)
    for where, value in uncertain.items():
        if stored[where] == value:
            expected[where] = value
    record = {"rounds": ROUNDS, "killed_at_round": KILL_AT - 1, "lost_updates": lost(stored, expected),
              "interrupted_write_landed": f"{landed}/{len(uncertain)}",
              "conflicts_a": conflicts_a, "conflicts_b_before_kill": conflicts_b}
    figures_line(request, "SIGKILL of mount B", record)
    assert not wrong, wrong
    assert record["lost_updates"] == 0, (record, stored, expected)
    assert "Traceback" not in mount_a.log(), mount_a.log()


def test_write_back_over_a_chunk_the_other_mount_deleted(kind: str, tmp_path: Path,
                                                         request: pytest.FixtureRequest) -> None:
    """Both mounts cache chunk (0, 0); A sets all of it to the fill value (its write-back
    deletes the stored chunk), then B, whose copy is stale, writes one element of it. B's
    write-back must find the chunk gone, merge and store it (fill, and B's element).

    Found failing on S3: a put with If-Match on a key that no longer exists gets 404
    NoSuchKey, not 412, and zarrfs reports it as a store error (EIO) instead of a conflict;
    every later write-back fails the same way, so B's write can never be stored."""
    made = make_target(kind, False, request, tmp_path)
    expected = INITIAL.copy()
    expected[:8, :8] = -1
    expected[5, 3] = 2_000_000
    with two_writers(made.source, made.mount_options, tmp_path) as (a, b):
        mount_b = b.mount
        a.read_all()
        b.read_all()
        a.write({(i, j): -1 for i in range(8) for j in range(8)})
        a.fsync()
        b.write({(5, 3): 2_000_000})
        fsync_error = None
        try:
            b.fsync()
        except OSError as e:
            fsync_error = e
        if fsync_error is not None:  # it would retry its final write-back for a minute
            log = mount_b.log()
            mount_b.process.kill()
    stored = made.read()
    figures_line(request, "write over a chunk the other mount deleted",
                 {"fsync_error": str(fsync_error), "lost_updates": lost(stored, expected),
                  "b_exit_status": mount_b.process.returncode})
    assert fsync_error is None, f"B's fsync failed: {fsync_error}\n{log}"
    assert lost(stored, expected) == 0, (stored, expected)
    assert mount_b.process.returncode == 0, mount_b.log()
