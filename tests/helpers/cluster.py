"""N zarrfs mounts of one S3 array as N nodes of a cluster, all writing into the same shards at
once: the workload of tests/reliability/test_cluster.py and benchmarks/cluster.py.

The array: 32 x 64 int32 (fill -1) in two 32 x 32 shards of 8 x 8 inner chunks. Element f (its
flat C-order index) belongs to writer f % N, in round (f // N) % ROUNDS, and gets the value f:
every round, every writer writes elements of every inner chunk of both shards, and no element
is written twice. Each writer is a thread with `data` of its own mount open: per round it
pwrites its elements one by one, waits for the others at a barrier (so that all N write the
shards back at the same moment) and fsyncs. A write is *acknowledged* when its fsync returned 0;
each fsync's wall time is kept (the benchmark's latencies).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tests.helpers.mounting import Mount, mounted

SHAPE = (32, 64)
SHARDS = (32, 32)
INNER = (8, 8)
DTYPE = np.dtype("<i4")
FILL = -1
STARTING = 2  # daemons started at once
BARRIER_SECONDS = 120.0  # a bound on a round's wait for the other writers (a failure, not a pace)


@dataclass(frozen=True)
class Layout:
    writers: int
    rounds: int

    def owned(self, writer: int, round_: int) -> np.ndarray:
        """Flat indices (= values) of the elements `writer` writes in `round_`."""
        flat = np.arange(SHAPE[0] * SHAPE[1])
        return flat[(flat % self.writers == writer) & ((flat // self.writers) % self.rounds == round_)]


@dataclass
class WriterResult:
    writer: int
    acknowledged: list[np.ndarray] = field(default_factory=list)  # elements of fsyncs that returned 0
    unacknowledged: list[np.ndarray] = field(default_factory=list)  # written, fsync failed
    errors: list[str] = field(default_factory=list)
    fsync_seconds: list[float] = field(default_factory=list)


def create_array(url: str, storage_options: dict[str, Any]) -> None:
    """The array, by zarr-python, every element the fill value (no chunk stored)."""
    import zarr

    zarr.create_array(store=url, shape=SHAPE, chunks=INNER, shards=SHARDS, dtype=DTYPE,
                      fill_value=FILL, compressors=zarr.codecs.ZstdCodec(level=1),
                      storage_options=storage_options)


def read_array(url: str, storage_options: dict[str, Any]) -> np.ndarray:
    import zarr

    array = zarr.open_array(url, mode="r", storage_options=storage_options)
    return np.asarray(array[...]).reshape(-1)


@contextlib.contextmanager
def cluster_mounts(source: str, root: Path, count: int, options: Sequence[str]) -> Iterator[list[Mount]]:
    """`count` mounts of `source` (each its own `zarrfs mount -f` daemon), started two at a
    time: a daemon's start-up is mostly imports, CPU-bound, and eight at once on a loaded
    2-core machine took longer than a mount may (mounting.MOUNT_TIMEOUT). All unmounted at
    the end, whatever happens."""
    with contextlib.ExitStack() as stack:
        with ThreadPoolExecutor(STARTING) as pool:
            futures = [pool.submit(stack.enter_context, mounted(source, root / f"node{i}", options))
                       for i in range(count)]
        yield [future.result() for future in futures]


def write(data: Path, writer: int, layout: Layout, barrier: threading.Barrier) -> WriterResult:
    """One writer's rounds through its mount's `data`."""
    result = WriterResult(writer)
    fd = os.open(data, os.O_WRONLY)  # in place: the file has a fixed size
    try:
        for round_ in range(layout.rounds):
            elements = layout.owned(writer, round_)
            for f in elements:
                os.pwrite(fd, DTYPE.type(f).tobytes(), int(f) * DTYPE.itemsize)
            barrier.wait(BARRIER_SECONDS)
            began = time.perf_counter()
            try:
                os.fsync(fd)
            except OSError as e:
                result.unacknowledged.append(elements)
                result.errors.append(f"writer {writer}, round {round_}: {e}")
            else:
                result.acknowledged.append(elements)
            result.fsync_seconds.append(time.perf_counter() - began)
    except BaseException:
        barrier.abort()  # the others must not wait for this one
        raise
    finally:
        with contextlib.suppress(OSError):  # a failed fsync's data is only maybe stored
            os.close(fd)
    return result


def run_writers(data_files: Sequence[Path], layout: Layout) -> list[WriterResult]:
    """Every writer at once, one thread each (pwrite and fsync release the GIL)."""
    barrier = threading.Barrier(len(data_files))
    with ThreadPoolExecutor(len(data_files)) as pool:
        futures = [pool.submit(write, data, n, layout, barrier) for n, data in enumerate(data_files)]
        return [future.result() for future in futures]


def missing(stored: np.ndarray, results: Sequence[WriterResult]) -> list[tuple[int, int]]:
    """(element, stored value) of every acknowledged write the store does not hold."""
    acknowledged = np.concatenate([e for r in results for e in r.acknowledged] or [np.arange(0)])
    wrong = acknowledged[stored[acknowledged] != acknowledged]
    return [(int(f), int(stored[f])) for f in wrong]


def foreign(stored: np.ndarray) -> list[tuple[int, int]]:
    """Elements holding neither the fill value nor their own value (nobody wrote that)."""
    flat = np.arange(stored.size)
    bad = flat[(stored != FILL) & (stored != flat)]
    return [(int(f), int(stored[f])) for f in bad]


def percentile(seconds: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(seconds), q))
