"""A mount (`zarrfs mount -o rw`) and a server (`zarrfs serve -o rw`) of one store, writing at
the same time: different elements of one chunk, and different inner chunks of one shard. Both
go through the same write-back and compare-and-swap, so neither loses the other's writes.

The array: 16 x 16 int32 in 8 x 8 chunks (or one 16 x 16 shard of 8 x 8 inner chunks). Each
round both read the whole array first (the mount through `data`, direct_io, an fd kept open:
its daemon caches the chunks; the server by a GET, an open, which must show every write so
far), so each holds a copy that the other's write makes stale.
Then the mount writes two elements of chunk (0, 0) and fsyncs, while the server takes a
partial PUT of a row of chunk (0, 0)'s other rows (sharded: of inner chunk (0, 1)), which it
answers once stored. The test holds `flock` on the stored object (zarrfs's compare-and-swap
takes it after reading the object, `tests/reliability/test_two_mounts_conflicts.py`'s gate) until both
write-backs wait on it: whichever stores second finds the object changed, and must merge.
After the rounds zarr-python reads the store: every element holds its last written value."""

from __future__ import annotations

import http.client
import os
import shutil
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import pytest
import zarr

from tests.helpers.mounting import mounted
from tests.helpers.serving import Server, served
from tests.helpers.two_writers import KEY, LocalGate, Writer, in_thread

pytestmark = pytest.mark.skipif(
    not os.path.exists("/dev/fuse") or shutil.which("fusermount3") is None,
    reason="needs FUSE (/dev/fuse and fusermount3)",
)

ROUNDS = 16
SHAPE = (16, 16)
INITIAL = np.arange(SHAPE[0] * SHAPE[1], dtype="<i4").reshape(SHAPE)


def request(server: Server, method: str, name: str, body: bytes | None = None,
            headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    """A request by http.client: no process is forked (a child would hold the gate's lock and
    the mount's fd, whose close waits for a write-back that waits for the lock)."""
    address = urlsplit(server.url)
    connection = http.client.HTTPConnection(address.hostname or "", address.port, timeout=120)
    try:
        connection.request(method, "/" + name, body=body, headers=headers or {})
        answer = connection.getresponse()
        return answer.status, answer.read()
    finally:
        connection.close()


def mount_elements(r: int) -> dict[tuple[int, int], int]:
    """Two elements of chunk (inner chunk) (0, 0), rows 0-3."""
    return {(r % 4, r % 8): 1_000_000 + r * 100, ((r + 1) % 4, (3 * r + 4) % 8): 1_000_000 + r * 100 + 1}


def server_row(r: int, sharded: bool) -> tuple[int, int, np.ndarray]:
    """A row of eight elements: of chunk (0, 0)'s rows 4-7, or (sharded) of inner chunk (0, 1)."""
    row, column = (r % 8, 8) if sharded else (4 + r % 4, 0)
    return row, column, 2_000_000 + r * 100 + np.arange(8, dtype="<i4")


@pytest.mark.parametrize("sharded", [False, True], ids=["plain", "sharded"])
def test_a_mount_and_a_server_writing_one_chunk_lose_nothing(sharded: bool, tmp_path: Path) -> None:
    path = tmp_path / "array.zarr"
    zarr.create_array(path, shape=SHAPE, chunks=(8, 8), shards=(16, 16) if sharded else None, dtype="<i4",
                      fill_value=-1, compressors=zarr.codecs.ZstdCodec(level=1))[...] = INITIAL
    expected = INITIAL.copy()
    (tmp_path / "srv").mkdir()
    with served(path, tmp_path / "srv", ["rw"]) as server, \
            mounted(path, tmp_path / "mnt", ["rw", "direct_io", "cache=16M"]) as mount:
        writer = Writer("mount", mount).open()
        try:
            for r in range(ROUNDS):
                writer.read_all()  # (through the fd kept open: stale from the second round on)
                got = np.frombuffer(request(server, "GET", "data")[1], "<i4").reshape(SHAPE)
                assert np.array_equal(got, expected), f"round {r}: the server's GET (an open)"
                one_round(r, sharded, writer, server, path, expected)
            conflicts = writer.stats()["write_conflicts"]
        finally:
            writer.close()
    stored = np.asarray(zarr.open_array(path, mode="r")[...])
    lost = int((stored != expected).sum())
    print(f"{ROUNDS} rounds, {lost} lost updates, {conflicts} of the mount's write-backs conflicted")
    assert lost == 0, np.argwhere(stored != expected)


def one_round(r: int, sharded: bool, writer: Writer, server: Server, path: Path,
              expected: np.ndarray) -> None:
    """The mount's write and fsync and the server's PUT, their write-backs held at the gate
    together, then let go; `expected` takes both."""
    row, column, values = server_row(r, sharded)
    start = (row * SHAPE[1] + column) * 4
    ranged = {"Content-Range": f"bytes {start}-{start + values.nbytes - 1}/*"}
    statuses: list[int] = []
    with LocalGate(path / KEY).closed() as gate:
        by_mount = in_thread(lambda: (writer.write(mount_elements(r)), writer.fsync()))
        by_server = in_thread(lambda: statuses.append(
            request(server, "PUT", "data", values.tobytes(), ranged)[0]))
        gate.wait_held(2)  # (both write-backs have read the object: one of them is stale)
    by_mount()
    by_server()
    assert statuses == [204], (r, statuses, server.log())
    for where, value in mount_elements(r).items():
        expected[where] = value
    expected[row, column : column + 8] = values
