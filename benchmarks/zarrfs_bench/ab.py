"""`benchmarks/ab_s3.py`: two zarrfs trees, alternating run by run on the same arrays (the
latency benchmark's), over S3 behind the delaying proxy and from the local disk."""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from .arrays import Config, ts_open
from .common import VENV_BIN, dd, fmt_size, log, median, parse_size, settle, warm_files
from .latency import build, proxy_child
from .mounting import Mount, daemon_counters
from .s3 import BUCKET, environ, s3_server, s3_server_module, upload

MB = 1e6


@contextlib.contextmanager
def python_path(tree: str) -> Iterator[None]:
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = tree
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


def cold_dd(tree: str, source: str, opts: str, mp: Path, nbytes: int, logfile: Path) -> dict[str, float]:
    """One cold dd of `data` on a fresh mount served by `tree`'s code."""
    with python_path(tree), Mount(str(VENV_BIN / "zarrfs"), source, mp, opts, logfile=logfile) as m:
        assert m.pid is not None
        cpu0, faults0 = daemon_counters(m.pid)
        seconds = dd(m.mp / "data", "/dev/null", expect=nbytes)
        cpu1, faults1 = daemon_counters(m.pid)
    return {"MB/s": nbytes / seconds / MB, "cpu s": cpu1 - cpu0, "faults k": (faults1 - faults0) / 1000,
            "peak RSS MiB": m.peak_rss / (1 << 20)}


def report(title: str, runs: dict[str, list[dict[str, float]]], extra: str = "") -> None:
    print(f"\n{title}{extra}")
    keys = ["MB/s", "cpu s", "faults k", "peak RSS MiB"]
    print("| variant | " + " | ".join(keys) + " | runs (MB/s) |")
    print("|---|" + "---|" * (len(keys) + 1))
    for name, found in runs.items():
        cells = [f"{median([r[k] for r in found]) or 0:.3g}" for k in keys]
        each = " ".join(f"{r['MB/s']:.0f}" for r in found)
        print(f"| {name} | " + " | ".join(cells) + f" | {each} |", flush=True)


def alternate(variants: list[tuple[str, str]], pairs: int,
              one: Callable[[str, int], dict[str, float]]) -> dict[str, list[dict[str, float]]]:
    runs: dict[str, list[dict[str, float]]] = {name: [] for name, _ in variants}
    for pair in range(pairs):
        order = variants if pair % 2 == 0 else variants[::-1]
        for name, tree in order:
            runs[name].append(one(tree, pair))
            log(f"{name}: {runs[name][-1]}")
    return runs


def main(doc: str | None = None) -> None:
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("variants", nargs="+", help="name=tree")
    p.add_argument("--pairs", type=int, default=5)
    p.add_argument("--delay", type=float, default=0.01)
    p.add_argument("--layouts", default="sharded,plain")
    p.add_argument("--local", action="store_true", help="also cold dd from the local disk")
    p.add_argument("--size", type=parse_size, default=parse_size("256M"))
    p.add_argument("--cache", default="256M")
    a = p.parse_args()
    variants = [tuple(v.split("=", 1)) for v in a.variants]
    layouts = a.layouts.split(",")
    work = Path(tempfile.mkdtemp(prefix="zarrfs-ab-", dir="/var/tmp"))
    shm = Path(tempfile.mkdtemp(prefix="zarrfs-ab-", dir="/dev/shm"))
    logfile = Path(tempfile.gettempdir()) / "zarrfs-ab-daemon.log"
    try:
        configs = [c for c in build(a.size, work, shm) if ("sharded" if c.sharded else "plain") in layouts]
        settle()
        for cfg in configs:
            ab_s3(cfg, variants, a, work, logfile)
            if a.local:
                ab_local(cfg, variants, a, work, logfile)
    finally:
        shutil.rmtree(shm, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)


def ab_s3(cfg: Config, variants: list[tuple[str, str]], a: argparse.Namespace, work: Path,
          logfile: Path) -> None:
    mod = s3_server_module()
    layout = "sharded" if cfg.sharded else "plain"
    with environ(mod.S3_ENV), open(logfile, "ab") as log_out, s3_server(log_out) as endpoint:
        upload(cfg, endpoint, cfg.path.name)
        with proxy_child(int(endpoint.rsplit(":", 1)[1]), a.delay, log_out) as proxy:
            kvstore = {"driver": "s3", "bucket": BUCKET, "path": cfg.path.name + "/", "endpoint": proxy.url,
                       "aws_region": "us-east-1", "aws_credentials": {"type": "environment"}}
            ts_runs: list[float] = []

            def one(tree: str, pair: int) -> dict[str, float]:
                if len(ts_runs) <= pair:
                    t0 = time.perf_counter()
                    ts_open(kvstore).read().result()
                    ts_runs.append(cfg.nbytes / (time.perf_counter() - t0) / MB)
                opts = f"cache={a.cache},endpoint_url={proxy.url}"
                source = f"s3://{BUCKET}/{cfg.path.name}"
                return cold_dd(tree, source, opts, work / "mnt", cfg.nbytes, logfile)

            runs = alternate(variants, a.pairs, one)
    ts = median(ts_runs) or 0
    report(f"S3, {layout}, {2000 * a.delay:.0f} ms round trip, {fmt_size(cfg.nbytes)}, cache={a.cache}", runs,
           f" (TensorStore {ts:.0f} MB/s, runs {' '.join(f'{t:.0f}' for t in ts_runs)})")


def ab_local(cfg: Config, variants: list[tuple[str, str]], a: argparse.Namespace, work: Path,
             logfile: Path) -> None:
    layout = "sharded" if cfg.sharded else "plain"

    def one(tree: str, pair: int) -> dict[str, float]:
        warm_files(cfg.path)
        return cold_dd(tree, str(cfg.path), f"cache={a.cache}", work / "mnt", cfg.nbytes, logfile)

    runs = alternate(variants, a.pairs, one)
    report(f"local disk, {layout}, {fmt_size(cfg.nbytes)}, cache={a.cache}", runs)
