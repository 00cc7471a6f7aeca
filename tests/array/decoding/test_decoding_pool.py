"""The decoding processes' pool without FUSE (zarrfs.array.decoding): a fork server forked by a
process of one thread (this test runs one: pytest's workers run threads, and a fork server is
refused there), its workers decoding real codecs' chunks into shared slabs, and its failures:
a corrupt chunk or a killed worker fail their job with WorkerFailed, and the next job gets a
new worker; closed, nothing of it is left."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import pytest

from zarrfs.array.decoding import ForkServer

pytestmark = pytest.mark.fast

SCRIPT = textwrap.dedent('''
    import os, signal, time
    import numpy as np
    import zarr
    from zarrfs.array_metadata import open_array
    from zarrfs.store import Store
    from zarrfs.array.decoding import DecodePool, ForkServer, Item, SharedSlab, WorkerFailed

    def parent_of(pid):
        try:
            with open(f"/proc/{pid}/stat") as stat:
                return int(stat.read().rsplit(")", 1)[1].split()[1])
        except FileNotFoundError:  # (it ended between the listing and the read)
            return None

    def children(pid):
        return [int(p) for p in os.listdir("/proc") if p.isdigit() and parent_of(p) == pid]

    server = ForkServer.start(None)  # (first: zarr-python starts threads)
    assert server is not None
    root = os.environ["ROOT"]
    values = np.arange(64 * 96, dtype="uint16").reshape(64, 96)
    for name, codecs in [("zstd", {}), ("blosc", {"compressors": zarr.codecs.BloscCodec()}),
                         ("sharded", {"shards": (64, 96)})]:
        zarr.create_array(f"{root}/{name}.zarr", shape=values.shape, chunks=(32, 48), dtype="uint16",
                          **codecs)[...] = values
    pool = DecodePool(server, 2)
    whole = (slice(None),) * 2
    for name in ("zstd", "blosc"):
        array = open_array(Store.open(f"{root}/{name}.zarr"))
        slab = SharedSlab(values.nbytes)
        items = [Item(array.io.decoder, open(f"{root}/{name}.zarr/c/{i}/{j}", "rb").read(), slab,
                      values.shape, ">u2", (slice(32 * i, 32 * i + 32), slice(48 * j, 48 * j + 48)), whole)
                 for i in range(2) for j in range(2)]
        assert pool.submit(items).result(10) >= 0
        assert (slab.array().view(">u2").reshape(values.shape) == values).all(), name
    sharded = open_array(Store.open(f"{root}/sharded.zarr"))
    (inner,) = [found.data for found in sharded.io.fetch_encoded_run("c/0/0", (0, 0), [(1, 1)])]
    slab = SharedSlab(32 * 48 * 2)
    pool.submit([Item(sharded.io.decoder, inner, slab, (32, 48), "<u2", whole, whole)]).result(10)
    assert (slab.array().view("<u2").reshape(32, 48) == values[32:, 48:]).all()
    bad = Item(array.io.decoder, b"not a chunk", slab, (32, 48), "<u2", whole, whole)
    try:
        pool.submit([bad]).result(10)
        raise SystemExit("a corrupt chunk decoded")
    except WorkerFailed as e:
        assert "decoding process failed a chunk" in str(e), e
    first = pool.pids
    for pid in first:
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while set(pool.pids) & set(first) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not set(pool.pids) & set(first), "the killed workers are still the pool's"
    pool.submit(items).result(10)
    assert pool.pids and not set(pool.pids) & set(first)
    assert pool.failures == len(first)
    forked = [server.pid, *children(server.pid)]
    pool.close()
    deadline = time.monotonic() + 10
    while any(os.path.exists(f"/proc/{pid}") for pid in forked) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not [pid for pid in forked if os.path.exists(f"/proc/{pid}")], "processes outlived the pool"
    print("ok")
''')


def test_the_pool_decodes_fails_and_recovers(tmp_path: object) -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120,
                          env={"ROOT": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stdout + done.stderr


def test_no_fork_server_where_threads_run() -> None:
    """Forking a process that runs threads would copy their locks as they are: refused."""
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert ForkServer.start(None) is None
    finally:
        stop.set()
        thread.join()


@pytest.mark.parametrize("size", [0, 1, 5 << 20])
def test_messages_carry_bytes_and_descriptors(size: int) -> None:
    """The wire: a header, a payload of any size (sent in pieces, received whole), descriptors."""
    import os
    import socket

    from zarrfs.array.decoding import wire

    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    payload = os.urandom(size)
    read_end, write_end = os.pipe()
    halves = [payload[:size // 2], payload[size // 2:]]
    sender = threading.Thread(target=wire.send, args=(ours, ("hello", size), halves, [write_end]))
    sender.start()
    header, got, fds = wire.receive(theirs)
    sender.join()
    assert header == ("hello", size) and bytes(got) == payload and len(fds) == 1
    os.write(fds[0], b"x")
    assert os.read(read_end, 1) == b"x"
    for fd in (read_end, write_end, *fds):
        os.close(fd)
    ours.close()
    with pytest.raises(wire.Closed):
        wire.receive(theirs)
    theirs.close()
