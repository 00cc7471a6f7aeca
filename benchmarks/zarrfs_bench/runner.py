"""The order of the sections of one run."""

from __future__ import annotations

import shutil
import time

import numpy as np

from . import big, groups, profiling, reads, s3, small, writes
from .arrays import Config, build_big, build_configs
from .common import log, settle
from .context import Bench


def pick(configs: list[Config], name: str) -> Config:
    """The config called `name`, else the first one."""
    return next((c for c in configs if c.name == name), configs[0])


def run(b: Bench) -> None:
    a = b.args
    t_start = time.perf_counter()
    try:
        if not a.only_group:
            run_arrays(b)
        if a.only_group or (not a.skip_group and b.zarrfs_ok):
            log("groups: mount and ls of a group of small arrays")
            groups.groups(b)
    finally:
        b.elapsed = time.perf_counter() - t_start


def run_arrays(b: Bench) -> None:
    a = b.args
    b.configs = build_configs(a, b.work, b.shm)
    settle()
    sums: dict[str, float] = {}
    data2: dict[str, np.ndarray] = {}
    for cfg in b.configs:
        if cfg.dtype not in sums:
            sums[cfg.dtype] = float(np.fromfile(cfg.raw, dtype=cfg.dtype).sum())
            data2[cfg.dtype] = np.fromfile(cfg.raw2, dtype=cfg.dtype).reshape(cfg.shape)
    for cfg in [] if a.skip_reads else b.configs:
        log(f"reads: {cfg.name}")
        for rep in range(a.repeat):
            reads.baseline_reads(b, cfg, sums[cfg.dtype])
            b.zarrfs_try(f"{cfg.name} zarrfs dd/pread", reads.zarrfs_reads, b, cfg, rep)
            b.zarrfs_try(f"{cfg.name} zarrfs memmap", reads.zarrfs_memmap, b, cfg, sums[cfg.dtype])
    if not a.skip_writes:
        for cfg in b.configs:
            log(f"writes: {cfg.name}")
            for rep in range(a.write_repeat):
                writes.baseline_writes(b, cfg, data2[cfg.dtype])
                b.zarrfs_try(
                    f"{cfg.name} zarrfs write", writes.zarrfs_write, b, cfg, data2[cfg.dtype], rep == 0
                )
    data2.clear()
    if not a.skip_s3 and b.configs:
        b.s3_config = pick(b.configs, a.s3_config)
        log(f"S3: {b.s3_config.name} from a local moto server")
        try:
            s3.s3_reads(b, b.s3_config)
        except Exception as e:
            b.res.err(f"{b.s3_config.name} on S3", e)
    if not a.skip_small and b.zarrfs_ok:
        b.zarrfs_try("small chunks", small.small_chunks, b)
    if a.profile and b.configs:
        pc = pick(b.configs, a.profile_config)
        log(f"profile: cold read of {pc.name} under py-spy")
        b.zarrfs_try("profile", profiling.profile, b, pc)
    if not a.skip_big and b.zarrfs_ok:
        big_cfg = build_big(a, b.work)
        settle()
        log("memory: streaming the big array")
        b.zarrfs_try("memory", big.memory, b, big_cfg)
        log("sharding: one inner chunk")
        b.zarrfs_try("shard cost", big.shard_cost, b, big_cfg)
        shutil.rmtree(big_cfg.path, ignore_errors=True)
