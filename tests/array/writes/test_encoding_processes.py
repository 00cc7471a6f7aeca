"""Written chunks encoded in the decoding processes (issue 87: zarrfs.array.writes.policy,
zarrfs.array.decoding.staging and .encoding), through real mounts.

A whole-array `dd` into `data` of an array, plain and sharded, is encoded by the workers
(`zarrfs stats`), and TensorStore and zarr-python read back what was written. Workers killed
again and again while they encode lose nothing: those chunks are encoded in the daemon, the
next ones by new workers. Once fsync returns the chunks are in the store: the daemon SIGKILLed
right after, both readers find every element. The arrays are zstd level 5 (slow to encode:
the policy sends its chunks to the processes on any machine, once it has measured one; so
each test writes the array once before what it checks)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tensorstore as ts
import zarr
from zarr.codecs import ZstdCodec

from tests.helpers.mounting import MountFactory, mount_stats, wait_until

SHAPE = (2048, 4096)  # uint16: 16 MiB, 32 chunks of 512 KiB (the policy's least is 64 KiB)
CHUNKS = (512, 512)
SHARDS = (1024, 2048)
CHUNK_COUNT = (SHAPE[0] // CHUNKS[0]) * (SHAPE[1] // CHUNKS[1])
STEP = 1 << 20


def fresh_array(path: Path, sharded: bool) -> Path:
    """An array with no chunk stored (zarr-python's metadata alone)."""
    zarr.create_array(path, shape=SHAPE, dtype="uint16", chunks=CHUNKS, shards=SHARDS if sharded else None,
                      compressors=ZstdCodec(level=5), fill_value=0)
    return path


def image(seed: int) -> np.ndarray[Any, Any]:
    rng = np.random.default_rng(seed)
    return (np.cumsum(rng.integers(-3, 4, SHAPE), axis=1) % 4000 + 1).astype("uint16")


def stored(path: Path) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """The array as TensorStore and as zarr-python read it from the store."""
    spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path)}}
    by_zarr = np.asarray(zarr.open_array(path, mode="r")[...])
    return np.asarray(ts.open(spec).result().read().result()), by_zarr


def write(data: Path, values: np.ndarray[Any, Any]) -> int:
    """The values written into `data` a MiB at a time, then fsynced (the descriptor, open)."""
    raw = memoryview(values.view(np.uint8).reshape(-1))
    fd = os.open(data, os.O_WRONLY)
    for at in range(0, len(raw), STEP):
        os.pwrite(fd, raw[at : at + STEP], at)
    os.fsync(fd)
    return fd


def workers(daemon: int) -> list[int]:
    """The daemon's grandchildren: its fork server's workers."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError, IndexError, ValueError):
            parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
    children = {pid for pid, parent in parents.items() if parent == daemon}
    return [pid for pid, parent in parents.items() if parent in children]


def running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "R"
    except OSError:
        return False


@pytest.mark.parametrize("layout", ["plain", "sharded"])
def test_workers_encode_a_whole_array_dd(tmp_path: Path, mount_array: MountFactory, layout: str) -> None:
    """`dd bs=1M conv=notrunc,fsync` of the whole array (a second time: the first measured how
    its chunks encode): every chunk (inner chunk) is encoded once, by a worker; the store holds
    the values when dd returns."""
    path = fresh_array(tmp_path / "a.zarr", layout == "sharded")
    mount = mount_array(path)
    os.close(write(mount.data, image(1)))
    values = image(2)
    raw = tmp_path / "values.raw"
    raw.write_bytes(values.tobytes())
    before = mount_stats(mount)
    subprocess.run(["dd", f"if={raw}", f"of={mount.data}", "bs=1M", "conv=notrunc,fsync", "status=none"],
                   check=True, timeout=120)
    after = mount_stats(mount)
    assert after["chunks_encoded"] - before["chunks_encoded"] == CHUNK_COUNT, (before, after)
    assert after["chunks_encoded_in_processes"] - before["chunks_encoded_in_processes"] == CHUNK_COUNT
    assert workers(mount.process.pid)
    for found in stored(path):
        assert np.array_equal(found, values)


@pytest.mark.parametrize("layout", ["plain", "sharded"])
def test_workers_killed_while_encoding_lose_no_write(tmp_path: Path, mount_array: MountFactory,
                                                     layout: str) -> None:
    """Workers SIGKILLed whenever they are seen running, through whole-array writes: each
    write reads back whole once fsynced, and the log tells of chunks encoded in the daemon
    instead (rounds of writes until it does, a few at most: the workers run most of a write).
    Writes after the killing are encoded by new workers."""
    path = fresh_array(tmp_path / "a.zarr", layout == "sharded")
    mount = mount_array(path)
    killed = [0]

    def kill_running(stop: threading.Event) -> None:
        while not stop.wait(0.002):
            for pid in workers(mount.process.pid):
                if running(pid):
                    os.kill(pid, signal.SIGKILL)
                    killed[0] += 1

    for seed in range(2, 8):
        values = image(seed)
        stop = threading.Event()
        killer = threading.Thread(target=kill_running, args=(stop,))
        killer.start()
        try:
            os.close(write(mount.data, values))
        finally:
            stop.set()
            killer.join()
        for found in stored(path):
            assert np.array_equal(found, values), seed
        if "is encoded in the daemon" in mount.log():
            break
    assert killed[0] and "is encoded in the daemon" in mount.log(), (killed, mount.log())
    before = mount_stats(mount)["chunks_encoded_in_processes"]
    values = image(99)
    os.close(write(mount.data, values))
    assert mount_stats(mount)["chunks_encoded_in_processes"] >= before + CHUNK_COUNT // 2
    for found in stored(path):
        assert np.array_equal(found, values)


def test_fsync_returns_once_the_workers_encodings_are_stored(tmp_path: Path,
                                                             mount_array: MountFactory) -> None:
    """Written and fsynced, the daemon SIGKILLed at once (nothing written back after): the
    store holds every element, encoded by the workers."""
    path = fresh_array(tmp_path / "a.zarr", sharded=False)
    mount = mount_array(path)
    os.close(write(mount.data, image(1)))
    before = mount_stats(mount)["chunks_encoded_in_processes"]
    values = image(3)
    fd = write(mount.data, values)
    assert mount_stats(mount)["chunks_encoded_in_processes"] - before == CHUNK_COUNT
    forked = workers(mount.process.pid)
    mount.process.kill()
    mount.process.wait(20)
    with contextlib.suppress(OSError):  # (the mount is dead)
        os.close(fd)
    wait_until(lambda: not any(Path(f"/proc/{pid}").exists() for pid in forked),
               what="the workers' end with the daemon")
    for found in stored(path):
        assert np.array_equal(found, values)
