"""Measurements that touch a mount run in a child python (`run.py --_worker KIND ...`), so a
hung daemon fails one figure instead of hanging the benchmark."""

from __future__ import annotations

import json
import os
import random
import sys
import time
from typing import Any

import numpy as np

from .common import RUN_PY, run_checked


def worker(*args: str, timeout: float = 600) -> dict[str, Any]:
    """Run one measurement in a child python; its last line of output is JSON.

    With one BLAS thread: numpy's BLAS threads spin for ~0.1 CPU-s after the import, which
    is when the measurement starts, taking a core from the daemon measured (np.memmap sum
    of uint16/zstd/plain: 984 MB/s median with them, 1,083 without, 5 runs each)."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    r = run_checked([sys.executable, str(RUN_PY), "--_worker", *args], timeout=timeout, env=env)
    return dict(json.loads(r.stdout.strip().splitlines()[-1]))


def memmap_sum(path: str, dtype: str) -> dict[str, Any]:
    t0 = time.perf_counter()
    m = np.memmap(path, dtype=dtype, mode="r")
    s = m.sum()
    return {"seconds": time.perf_counter() - t0, "sum": float(s), "n": int(m.size)}


def pread(path: str, raw: str, n: int, seed: int) -> dict[str, Any]:
    """`n` random page-aligned 4 KiB preads of `path`, checked against the file `raw`."""
    size = os.path.getsize(raw)
    rng = random.Random(seed)
    offs = [rng.randrange(0, max(1, size // 4096)) * 4096 for _ in range(n)]
    fd = os.open(path, os.O_RDONLY)
    got = []
    t0 = time.perf_counter()
    for o in offs:
        got.append(os.pread(fd, 4096, o))
    dt = time.perf_counter() - t0
    os.close(fd)
    bad = 0
    with open(raw, "rb") as f:
        for o, g in zip(offs, got, strict=True):
            f.seek(o)
            bad += f.read(4096) != g
    return {"seconds": dt, "n": n, "mismatches": bad}


def read_page(path: str, off: int, length: int, fadvise: bool) -> dict[str, Any]:
    fd = os.open(path, os.O_RDONLY)
    if fadvise:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
    b = os.pread(fd, length, off)
    os.close(fd)
    return {"hex": b.hex()}


def worker_main(argv: list[str]) -> None:
    kind = argv[0]
    if kind == "memmap_sum":
        out = memmap_sum(argv[1], argv[2])
    elif kind == "pread":
        out = pread(argv[1], argv[2], int(argv[3]), int(argv[4]))
    elif kind == "read_page":
        out = read_page(argv[1], int(argv[2]), int(argv[3]), argv[4] == "1")
    elif kind == "proxy":
        from .latency import serve_proxy

        serve_proxy(int(argv[1]), float(argv[2]))
        return
    elif kind == "s3_server":
        from .s3 import serve

        serve(int(argv[1]), argv[2])
        return
    else:
        raise SystemExit(f"unknown worker {kind}")
    print(json.dumps(out))
