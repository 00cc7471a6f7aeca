"""The decoding processes (issue 77, zarrfs.array.decoding): a sequential reader's chunks are
decoded by worker processes the daemon's fork server forks, into slabs of shared memory.

Through real mounts: the bytes are zarr-python's; the workers' decoding shows in `zarrfs stats`;
a worker killed while idle or in the middle of reads costs nothing but time (its jobs are
decoded again in the daemon, the next ones get a new worker); a worker never outlives the
daemon (unmounted, or killed); an unmount leaves no process and no shared memory; under
`-o user=` the workers run as that user; every process of the mount together stays within
the cache's bound (PSS, which counts shared pages once)."""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr

from tests.helpers.mounting import Mount, MountFactory, mounted, wait_until
from tests.helpers.mounting import mount_stats as stats
from tests.helpers.processes import alive, children, pss
from tests.helpers.trust_helpers import NOBODY, public

__all__ = ["public"]  # (the fixture, used by name)

CHUNK = (512, 512)


def image(path: Path, shape: tuple[int, int], **codecs: Any) -> np.ndarray[Any, Any]:
    """A uint16 image in 512 x 512 chunks (zstd unless told), its values."""
    rng = np.random.default_rng(sum(shape))
    values = (np.cumsum(rng.integers(-3, 4, shape), axis=1) % 4000).astype("uint16")
    array = zarr.create_array(path, shape=shape, chunks=CHUNK, dtype="uint16", fill_value=0, **codecs)
    array[...] = values
    return values


@pytest.fixture(scope="module")
def picture(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray[Any, Any]]:
    root = tmp_path_factory.mktemp("decoding")
    return root / "a.zarr", image(root / "a.zarr", (4096, 4096))


def command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


RESTARTED_SERVER = "-m zarrfs.array.decoding.server "


def fork_server(mount: Mount) -> int:
    """The daemon's child that forks the workers (its other child is the watchdog): forked
    from the daemon, or started again in a fresh interpreter."""
    daemon = mount.process.pid
    servers = [pid for pid in children(daemon)
               if command(pid) == command(daemon) or RESTARTED_SERVER in command(pid)]
    assert len(servers) == 1, (servers, [command(pid) for pid in children(daemon)])
    return servers[0]


def workers(mount: Mount) -> list[int]:
    return children(fork_server(mount))


def read_all(path: Path, shape: tuple[int, ...], step: int = 1 << 20) -> np.ndarray[Any, Any]:
    """The flat file read in order, `step` bytes a read, as an unbuffered reader (dd) reads it."""
    with open(path, "rb", buffering=0) as f:
        data = b"".join(iter(lambda: f.read(step), b""))
    return np.frombuffer(data, "<u2").reshape(shape)


def test_workers_decode_a_sequential_read(picture: tuple[Path, np.ndarray[Any, Any]],
                                          mount_array: MountFactory) -> None:
    """The workers are forked once the mount serves (one a core: none is left to the first
    read), decode the chunks, and hold nothing but their socket and slabs: no file of the
    store, not the FUSE device, none of the daemon's pipes or logs (a directory of the store
    lent for a job is closed with it)."""
    source, values = picture
    mount = mount_array(source, ["ro"])
    cores = len(os.sched_getaffinity(0))
    wait_until(lambda: len(workers(mount)) == cores, what=f"{cores} workers forked before any read")
    first = set(workers(mount))
    assert np.array_equal(read_all(mount.data, values.shape), values)
    assert set(workers(mount)) == first, "the read forked workers of its own"
    assert stats(mount)["chunks_decoded"] >= 64  # (every chunk of the file, each decoded once)
    for pid in [fork_server(mount), *workers(mount)]:
        held = {fd.name: os.readlink(fd) for fd in Path(f"/proc/{pid}/fd").iterdir()}
        assert {held[n] for n in ("0", "1", "2")} == {"/dev/null"}, held
        others = [target for n, target in held.items() if n not in ("0", "1", "2")]
        assert all(t.startswith(("socket:", "/memfd:zarrfs-slab")) for t in others), held


@pytest.mark.parametrize("when", ["idle", "reading"])
def test_a_killed_worker_costs_only_time(picture: tuple[Path, np.ndarray[Any, Any]],
                                         mount_array: MountFactory, when: str) -> None:
    """Workers SIGKILLed between reads, or again and again during one: every read gives the
    array's bytes; the next jobs get new workers."""
    source, values = picture
    mount = mount_array(source, ["ro", "direct_io"])  # (every read reaches the daemon)
    assert np.array_equal(read_all(mount.data, values.shape), values)
    first = workers(mount)
    stop = threading.Event()

    def kill_workers() -> None:
        while True:
            for pid in workers(mount):
                os.kill(pid, signal.SIGKILL)
            if stop.wait(0.01) or when == "idle":
                return

    killer = threading.Thread(target=kill_workers)
    killer.start()
    try:
        if when == "idle":
            killer.join()
            wait_until(lambda: not any(alive(pid) for pid in first), what="the workers' end")
        assert np.array_equal(read_all(mount.data, values.shape), values)
    finally:
        stop.set()
        killer.join()
    wait_until(lambda: "read again in the daemon" in mount.log(), what="the log of a worker's end")
    if when == "idle":
        assert np.array_equal(read_all(mount.data, values.shape), values)
        assert workers(mount) and not set(workers(mount)) & set(first)


def reaped(mount: Mount, pid: int) -> bool:
    return pid not in children(mount.process.pid)


def test_a_killed_fork_server_is_started_again(picture: tuple[Path, np.ndarray[Any, Any]],
                                               mount_array: MountFactory) -> None:
    """The fork server SIGKILLed (as the OOM killer may): it is reaped at once (no zombie), the
    next read's workers come from a new one, started again, and the bytes are right; twice.
    The daemon killed, the new one and its workers end too."""
    source, values = picture
    mount = mount_array(source, ["ro", "direct_io"])
    assert np.array_equal(read_all(mount.data, values.shape), values)
    for _ in range(2):
        server = fork_server(mount)
        os.kill(server, signal.SIGKILL)
        wait_until(functools.partial(reaped, mount, server), what="the killed fork server reaped")
        assert np.array_equal(read_all(mount.data, values.shape), values)
        wait_until(lambda: workers(mount), what="workers of the new fork server")
        assert fork_server(mount) != server
        assert RESTARTED_SERVER in command(fork_server(mount))
    assert "it is started again" in mount.log()
    assert np.array_equal(read_all(mount.data, values.shape), values)
    assert stats(mount)["chunks_decoded"] >= 3 * 64
    processes = [fork_server(mount), *workers(mount)]
    mount.process.kill()  # (the new server and its workers end with the daemon, as the first)
    mount.process.wait(10)
    wait_until(lambda: not any(alive(pid) for pid in processes), what="the new fork server's end")


@pytest.mark.parametrize("end", ["unmount", "kill"])
def test_no_process_or_shared_memory_outlives_the_mount(picture: tuple[Path, np.ndarray[Any, Any]],
                                                          tmp_path: Path, end: str) -> None:
    """Unmounted: the daemon, its fork server and its workers are gone, and no process holds a
    slab; killed (SIGKILL): the fork server and the workers end with it. Its shared memory has
    no name anywhere (memory files; /dev/shm's entries it maps, blosc's semaphore, are unlinked
    when made), so nothing is left to remove."""
    source, values = picture
    with mounted(source, tmp_path / end, ["ro"]) as mount:
        read_all(mount.data, values.shape)
        server, forked = fork_server(mount), workers(mount)
        processes = [mount.process.pid, server, *forked]
        assert forked and slabs_held(mount.process.pid)
        assert not named_shared_memory(processes), named_shared_memory(processes)
        if end == "kill":
            mount.process.kill()
            mount.process.wait(10)
            wait_until(lambda: not any(alive(pid) for pid in processes),
                       what="the fork server's and workers' end after the daemon's")
    for pid in processes:
        assert not alive(pid), (pid, command(pid))
    assert not slabs_held(mount.process.pid)


def named_shared_memory(pids: list[int]) -> list[str]:
    """The files in /dev/shm these processes map that still have a name there."""
    found = []
    for pid in pids:
        for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
            if "/dev/shm/" in line and not line.endswith("(deleted)"):
                found.append(line)
    return found


def slabs_held(daemon: int) -> list[str]:
    """The descriptors and mappings of the slabs (memory files) of the daemon `daemon` that
    any process holds."""
    name, found = f"zarrfs-slab-{daemon}-", []
    for fds in Path("/proc").glob("[0-9]*/fd"):
        try:
            found += [str(fd) for fd in fds.iterdir() if name in os.readlink(fd)]
        except OSError:
            continue
    for maps in Path("/proc").glob("[0-9]*/maps"):
        try:
            found += [str(maps) for line in maps.read_text().splitlines() if name in line]
        except OSError:
            continue
    return found


def test_workers_run_as_the_user_served(picture: tuple[Path, np.ndarray[Any, Any]], public: Path) -> None:
    """`-o user=nobody`: the fork server and its workers are nobody's, for good (no saved
    root), and read the array as nobody may; so are a fork server started again after the
    first was killed, and its workers (it cannot set groups: it needs not)."""
    source, values = picture
    shutil.copytree(source, public / "a.zarr")
    subprocess.run(["chmod", "-R", "a+rX", str(public)], check=True)
    options = ["ro", "user=nobody", "allow_other", "direct_io"]  # (every read reaches the daemon)
    with mounted(public / "a.zarr", public / "mnt", options) as mount:
        for restarted in (False, True):
            if restarted:
                killed = fork_server(mount)
                os.kill(killed, signal.SIGKILL)
                wait_until(functools.partial(reaped, mount, killed), what="the killed fork server reaped")
            assert np.array_equal(read_all(mount.data, values.shape), values)
            wait_until(lambda: workers(mount), what="the fork server's workers")
            assert (RESTARTED_SERVER in command(fork_server(mount))) == restarted
            for pid in (fork_server(mount), *workers(mount)):
                status = Path(f"/proc/{pid}/status").read_text().splitlines()
                uids = next(line for line in status if line.startswith("Uid:")).split()[1:]
                assert uids == [str(NOBODY.pw_uid)] * 4, (pid, uids)
        assert stats(mount)["chunks_decoded"] >= 64
        assert "no decoding process could be started" not in mount.log()


@pytest.fixture(scope="module")
def large(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, np.ndarray[Any, Any]]]:
    root = tmp_path_factory.mktemp("large")
    yield root / "b.zarr", image(root / "b.zarr", (8192, 8192))


CACHE = 64 << 20
MARGIN = 100 << 20  # (the daemon's own: Python, its modules, buffers of replies and stores)
PER_WORKER = 50 << 20


def test_every_process_of_the_mount_stays_within_the_bound(large: tuple[Path, np.ndarray[Any, Any]],
                                                             mount_array: MountFactory) -> None:
    """Streaming 128 MiB through `-o cache=64M`: the daemon, the fork server and the workers,
    their PSS summed (shared slabs and modules counted once), sampled every 20 ms."""
    source, values = large
    mount = mount_array(source, ["ro", f"cache={CACHE >> 20}M"])
    peaks: list[int] = []
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.02):
            peaks.append(pss([mount.process.pid, *children(mount.process.pid), *workers(mount)]))

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        assert np.array_equal(read_all(mount.data, values.shape), values)
    finally:
        done.set()
        sampler.join()
    count = len(workers(mount))
    print(f"peak PSS of the mount's processes: {max(peaks) >> 20} MiB ({count} workers)")
    assert count >= 1 and max(peaks) <= CACHE + MARGIN + count * PER_WORKER, max(peaks) >> 20
