"""A random writer stays within the memory bound (issue 95): the daemon with its fork server
and watchdog (PSS, shared pages counted once) holds at most the cache + 100 MiB, and each
decoding process at most its share, while random 4-256 KiB writes go through a shared mapping
of `data` (each page read before it is written), then msync and fsync: fio's mmap engine for
8 s, as benchmarks/random_writes.py runs it (372 MiB against 356 before the trimmer followed
the cache's frees and write-backs counted their masks and buffers), and a Python writer whose
values are then read back (a chunk no longer lent is written in place). Through real mounts."""

from __future__ import annotations

import mmap
import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr

from tests.helpers.mounting import MountFactory
from tests.helpers.processes import children, pss

CACHE = 256 << 20
MARGIN = 100 << 20  # (the daemon's own: Python, its modules, buffers of replies and stores)
PER_WORKER = 50 << 20
SHAPE = (8192, 16384)  # 256 MiB of uint16 in 512 x 512 chunks: what the cache holds
WRITES = 400
PAGE = 4096


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray[Any, Any]]:
    path = tmp_path_factory.mktemp("random-writes") / "a.zarr"
    rng = np.random.default_rng(95)
    values = (np.cumsum(rng.integers(-3, 4, SHAPE), axis=1) % 4000).astype("<u2")
    array = zarr.create_array(path, shape=SHAPE, chunks=(512, 512), dtype="uint16", fill_value=0)
    array[...] = values
    return path, values


def write_at_random(data: Path, expected: np.ndarray[Any, Any]) -> None:
    """WRITES writes of 4-256 KiB at random page-aligned offsets through a shared mapping,
    each of new values, also made in `expected` (flat); then msync and fsync."""
    rng = np.random.default_rng(62)
    flat = expected.reshape(-1).view(np.uint8)
    with open(data, "r+b") as f, mmap.mmap(f.fileno(), 0) as mapping:
        for _ in range(WRITES):
            size = int(rng.integers(1, 65)) * PAGE
            offset = int(rng.integers(0, (len(mapping) - size) // PAGE + 1)) * PAGE
            new = rng.integers(0, 256, size, dtype=np.uint8)
            mapping[offset:offset + size] = new.tobytes()
            flat[offset:offset + size] = new
        mapping.flush()
        os.fsync(f.fileno())


class Peaks:
    """The highest PSS of a daemon with its fork server and watchdog, and of any of its
    workers (the fork server's children), sampled every 20 ms while `sampling`."""

    def __init__(self, daemon: int) -> None:
        self.daemon, self.mount, self.worker = daemon, 0, 0

    def sample(self) -> None:
        helpers = children(self.daemon)
        workers = [pid for helper in helpers for pid in children(helper)]
        self.mount = max(self.mount, pss([self.daemon, *helpers]))
        self.worker = max([self.worker, *(pss([pid]) for pid in workers)])

    def within_the_bound(self) -> None:
        print(f"peak PSS: the daemon and its helpers {self.mount >> 20} MiB, a worker {self.worker >> 20}")
        assert self.mount <= CACHE + MARGIN, self.mount >> 20
        assert self.worker <= PER_WORKER, self.worker >> 20


def sampling(peaks: Peaks, work: Callable[[], object]) -> None:
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.02):
            peaks.sample()

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        work()
    finally:
        done.set()
        sampler.join()


@pytest.fixture
def copied(image: tuple[Path, np.ndarray[Any, Any]], tmp_path: Path) -> Iterator[Path]:
    """A fresh copy of the array, for one test to write into."""
    shutil.copytree(image[0], tmp_path / "a.zarr")
    yield tmp_path / "a.zarr"


@pytest.mark.skipif(shutil.which("fio") is None, reason="needs fio")
def test_fio_random_writes_stay_within_the_bound(copied: Path, mount_array: MountFactory) -> None:
    mount = mount_array(copied, [f"cache={CACHE >> 20}M"])
    peaks = Peaks(mount.process.pid)
    fio = ["fio", "--name=w", f"--filename={mount.data}", "--rw=randwrite", "--bsrange=4k-256k",
           "--ioengine=mmap", f"--size={np.prod(SHAPE) * 2}", "--time_based", "--runtime=8",
           "--end_fsync=1", "--fallocate=none", "--allow_file_create=0", "--randrepeat=0"]
    sampling(peaks, lambda: subprocess.run(fio, capture_output=True, timeout=600, check=True))
    peaks.within_the_bound()


def test_a_random_writer_stays_within_the_bound(copied: Path, image: tuple[Path, np.ndarray[Any, Any]],
                                                mount_array: MountFactory) -> None:
    mount = mount_array(copied, [f"cache={CACHE >> 20}M"])
    peaks = Peaks(mount.process.pid)
    expected = image[1].copy()
    sampling(peaks, lambda: write_at_random(mount.data, expected))
    peaks.within_the_bound()
    with open(mount.data, "rb") as f:
        assert np.array_equal(np.frombuffer(f.read(), "<u2").reshape(SHAPE), expected)
