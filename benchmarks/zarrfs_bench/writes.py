"""Whole-array writes of other values into a fresh copy of the array: TensorStore,
zarr-python, dd to tmpfs, and zarrfs (`dd conv=notrunc,fsync` into data)."""

from __future__ import annotations

import shutil
import time

import numpy as np

from .arrays import Config, ts_open
from .common import WARM_RUNS, dd, log
from .context import Bench


def baseline_writes(b: Bench, cfg: Config, data2: np.ndarray) -> None:
    """TensorStore (its file driver fsyncs) and zarr-python (it does not) writing the values
    of raw2 into fresh copies; dd of raw2 over a file of the same size on tmpfs."""
    import zarr

    dst = b.fresh_copy(cfg, "ts-write-copy")
    t0 = time.perf_counter()
    ts_open(dst, write=True).write(data2).result()
    b.res.add(cfg.name, "ts_write", time.perf_counter() - t0)
    shutil.rmtree(dst, ignore_errors=True)

    dst = b.fresh_copy(cfg, "zarr-write-copy")
    t0 = time.perf_counter()
    zarr.open_array(str(dst), mode="r+")[...] = data2
    b.res.add(cfg.name, "zarr_write", time.perf_counter() - t0)
    shutil.rmtree(dst, ignore_errors=True)

    target = b.shm / "write-target.raw"
    shutil.copyfile(cfg.raw, target)
    for _ in range(WARM_RUNS):  # short, hence several
        t = dd(cfg.raw2, target, "conv=notrunc,fsync", expect=cfg.nbytes)
        b.res.add(cfg.name, "tmpfs_write", t)
    target.unlink()


def zarrfs_write(b: Bench, cfg: Config, data2: np.ndarray, verify: bool) -> None:
    """dd of raw2 into data of a fresh copy, fsynced; the unmount (until the daemon has
    exited) timed too. With `verify`, the copy is read back with TensorStore."""
    dst = b.fresh_copy(cfg, "zarrfs-write-copy")
    try:
        with b.mount(dst) as m:
            t = dd(cfg.raw2, m.mp / "data", "conv=notrunc,fsync", expect=cfg.nbytes)
            b.res.add(cfg.name, "zfs_write", t)
        b.res.add(cfg.name, "zfs_write_rss", m.peak_rss)
        # Each run, not only the median: single runs here fall in two modes (see README).
        log(f"  zarrfs write: {cfg.nbytes / t / 1e6:,.0f} MB/s, peak RSS {m.peak_rss / 2**20:.0f} MiB")
        b.res.add(cfg.name, "zfs_write_close", t + (m.unmount_seconds or 0))
        if not verify:
            return
        back = ts_open(dst).read().result()
        if not np.array_equal(back.view(np.uint8), data2.view(np.uint8)):
            raise RuntimeError(
                "after the zarrfs write, TensorStore reads other values "
                f"({int((back != data2).sum())} elements differ)"
            )
    finally:
        shutil.rmtree(dst, ignore_errors=True)
