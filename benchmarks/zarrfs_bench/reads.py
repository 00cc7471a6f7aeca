"""Whole-array reads: the baselines (TensorStore, zarr-python, tmpfs) and zarrfs (cold and
warm dd, random 4 KiB preads, np.memmap sum), each zarrfs figure on a fresh mount."""

from __future__ import annotations

import time

import numpy as np

from .arrays import Config, ts_open
from .common import WARM_RUNS, dd, log, run_checked, warm_files
from .context import Bench
from .workers import worker


def baseline_reads(b: Bench, cfg: Config, expected_sum: float) -> None:
    """TensorStore and zarr-python reading the whole array into numpy (files in the page
    cache, no TensorStore cache pool); dd, random preads and np.memmap sum of the raw bytes
    on tmpfs, the machine's limits."""
    import zarr

    warm_files(cfg.path)
    t0 = time.perf_counter()
    out = ts_open(cfg.path).read().result()
    ts_seconds = time.perf_counter() - t0
    b.res.add(cfg.name, "ts_read", ts_seconds)
    log(f"  TensorStore read: {cfg.nbytes / ts_seconds / 1e6:,.0f} MB/s")
    assert out.nbytes == cfg.nbytes
    del out
    warm_files(cfg.path)
    t0 = time.perf_counter()
    out = zarr.open_array(str(cfg.path), mode="r")[...]
    b.res.add(cfg.name, "zarr_read", time.perf_counter() - t0)
    assert out.nbytes == cfg.nbytes
    del out
    for _ in range(WARM_RUNS):  # ~50 ms each at 256 MiB: take several
        b.res.add(cfg.name, "tmpfs_dd", dd(cfg.raw, "/dev/null", expect=cfg.nbytes))
    r = worker("pread", str(cfg.raw), str(cfg.raw), str(b.args.random_reads), "0")
    b.res.add(cfg.name, "tmpfs_rand", r["n"] / r["seconds"])
    b.res.add(cfg.name, "tmpfs_memmap", checked_memmap_sum(str(cfg.raw), cfg, expected_sum))


def checked_memmap_sum(path: str, cfg: Config, expected_sum: float) -> float:
    """Seconds for np.memmap(path).sum() in a child process, checked against the values."""
    r = worker("memmap_sum", path, cfg.dtype)
    if not np.isclose(r["sum"], expected_sum, rtol=1e-6, atol=0):
        raise RuntimeError(f"memmap sum of {path}: {r['sum']} != {expected_sum}")
    return float(r["seconds"])


def zarrfs_reads(b: Bench, cfg: Config, rep: int) -> None:
    """Cold dd of data, warm dd (WARM_RUNS times) and random preads on one fresh mount;
    then a cold dd on a mount with recheck=never (what close-to-open costs)."""
    warm_files(cfg.path)
    with b.mount(cfg.path) as m:
        data = m.mp / "data"
        size = int(run_checked(["stat", "-c", "%s", str(data)], timeout=30).stdout)
        if size != cfg.nbytes:
            raise RuntimeError(f"{data} is {size} bytes, expected {cfg.nbytes}")
        cold = dd(data, "/dev/null", expect=cfg.nbytes)
        b.res.add(cfg.name, "zfs_cold", cold)
        log(f"  zarrfs cold dd: {cfg.nbytes / cold / 1e6:,.0f} MB/s")  # (each run: see writes)
        for _ in range(WARM_RUNS):
            b.res.add(cfg.name, "zfs_warm", dd(data, "/dev/null", expect=cfg.nbytes))
        r = worker("pread", str(data), str(cfg.raw), str(b.args.random_reads), str(rep), timeout=120)
        b.res.add(cfg.name, "zfs_rand", r["n"] / r["seconds"])
    b.res.add(cfg.name, "zfs_rss", m.peak_rss)
    if r["mismatches"]:
        raise RuntimeError(f"{r['mismatches']} of {r['n']} random 4 KiB reads differ from the array")
    # What close-to-open costs: the same cold read with the store trusted until unmount.
    with b.mount(cfg.path, "recheck=never") as m:
        b.res.add(cfg.name, "zfs_cold_never", dd(m.mp / "data", "/dev/null", expect=cfg.nbytes))
    b.res.add(cfg.name, "zfs_rss", m.peak_rss)


def zarrfs_memmap(b: Bench, cfg: Config, expected_sum: float) -> None:
    """np.memmap(data).sum() on a fresh mount (cold), checked against the values."""
    warm_files(cfg.path)
    with b.mount(cfg.path) as m:
        t = checked_memmap_sum(str(m.mp / "data"), cfg, expected_sum)
        b.res.add(cfg.name, "zfs_memmap", t)
    b.res.add(cfg.name, "zfs_rss", m.peak_rss)
