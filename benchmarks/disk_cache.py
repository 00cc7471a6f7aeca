#!/usr/bin/env python3
"""zarrfs benchmark, disk cache section (issue 39): a job read twice with a remount between,
on S3 (a local moto server) behind a delaying proxy; the second run with `-o disk_cache`
against the same read from a local copy of the store, in the same run. Target: >= 0.8x of the
local copy. Medians of --repeat runs; a markdown report printed and written to --out.

    .venv/bin/python benchmarks/disk_cache.py [--size 128M] [--repeat 3] [--delay 0.01]
        [--out benchmarks/disk_cache.md]

The job is a cold `dd bs=1M` of `data` (the whole array) on a fresh mount; the arrays are
benchmarks/latency.py's (uint16, zstd: plain 512x512 chunks, and 8 MiB shards of 256x256
inner chunks). --delay is seconds per direction (0.01: a 20 ms round trip). A second table
gives the CPU each read took: the daemon's, and the S3 server's and proxy's, which share the
daemon's cores here (a remote server's would not).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from zarrfs_bench.common import cpu_seconds, dd, fmt_size, log, parse_size, run_checked
from zarrfs_bench.latency import build, proxy_child
from zarrfs_bench.mounting import Mount
from zarrfs_bench.s3 import BUCKET, SERVER_PIDS, environ, s3_server, s3_server_module, upload

TARGET = 0.8  # the warm S3 run from the disk cache, as a fraction of the local copy's speed
RUNS = ("local copy", "S3, no disk cache", "S3, filling the disk cache", "S3, from the disk cache")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="128M", help="bytes of each array (default 128M)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--delay", type=float, default=0.01, help="seconds each way (default 0.01)")
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "zarrfs-disk-cache.md")
    args = parser.parse_args()
    zarrfs = shutil.which("zarrfs", path=os.path.dirname(sys.executable)) or "zarrfs"
    with tempfile.TemporaryDirectory(prefix="zarrfs-disk-cache-") as temporary:
        work = Path(temporary)
        configs = build(parse_size(args.size), work, work)
        seconds, counted, cpu = measure(configs, args, zarrfs, work)
    report = render(configs, seconds, counted, args) + render_cpu(configs, cpu)
    print(report)
    args.out.write_text(report)
    log(f"report: {args.out}")


Seconds = dict[tuple[str, str], list[float]]  # (layout, run) -> seconds of each repeat
Counted = dict[str, list[tuple[int, int]]]  # layout -> disk cache hits and misses of each warm run
# (layout, run) -> CPU seconds of each repeat's read: the daemon's, and the S3 server's and proxy's
Cpu = dict[tuple[str, str], list[tuple[float, float]]]


def measure(configs: list, args: argparse.Namespace, zarrfs: str,
            work: Path) -> tuple[Seconds, Counted, Cpu]:
    mod = s3_server_module()
    seconds: Seconds = {}
    counted: Counted = {}
    cpu: Cpu = {}
    logfile = work / "daemons.log"
    with environ(mod.S3_ENV), open(logfile, "ab") as log_out, s3_server(log_out) as endpoint:
        for cfg in configs:
            upload(cfg, endpoint, cfg.path.name)
        with proxy_child(int(endpoint.rsplit(":", 1)[1]), args.delay, log_out) as proxy:
            serving = (SERVER_PIDS[endpoint], proxy.proc.pid)
            for cfg in configs:
                layout = "sharded" if cfg.sharded else "plain"
                source = f"s3://{BUCKET}/{cfg.path.name}"
                for rep in range(args.repeat):
                    cache = work / f"cache-{layout}-{rep}"
                    remote = f"endpoint_url={proxy.url}"
                    mounts = ((RUNS[0], str(cfg.path), ""), (RUNS[1], source, remote),
                              (RUNS[2], source, f"{remote},disk_cache={cache},disk_cache_size=4G"),
                              (RUNS[3], source, f"{remote},disk_cache={cache},disk_cache_size=4G"))
                    for run, where, opts in mounts:
                        with Mount(zarrfs, where, work / "mnt", opts, logfile=logfile) as m:
                            assert m.pid is not None
                            daemon, server = cpu_seconds(m.pid), sum(map(cpu_seconds, serving))
                            took = dd(m.mp / "data", "/dev/null", expect=cfg.nbytes)
                            cpu.setdefault((layout, run), []).append(
                                (cpu_seconds(m.pid) - daemon, sum(map(cpu_seconds, serving)) - server))
                            if rep == 0:
                                run_checked(["cmp", str(m.mp / "data"), str(cfg.raw)])
                            if run == RUNS[3]:
                                counted.setdefault(layout, []).append(disk_cache_counts(zarrfs, m.mp))
                        seconds.setdefault((layout, run), []).append(took)
                        log(f"disk cache: {layout} {run}: {cfg.nbytes / took / 1e6:.0f} MB/s")
                    shutil.rmtree(cache)
    return seconds, counted, cpu


def disk_cache_counts(zarrfs: str, mp: Path) -> tuple[int, int]:
    """The hits and misses of the disk cache of the mount at `mp` so far."""
    found = subprocess.run([zarrfs, "stats", "--json", str(mp)], capture_output=True, check=True)
    counts = json.loads(found.stdout)
    return int(counts["disk_cache_hits"]), int(counts["disk_cache_misses"])


def render(configs: list, seconds: Seconds, counted: Counted, args: argparse.Namespace) -> str:
    lines = [f"# Disk cache: a job read twice, S3 behind {2000 * args.delay:.0f} ms round trips",
             "",
             f"Cold `dd bs=1M` of `data` on a fresh mount, {fmt_size(configs[0].nbytes)} uint16 (zstd), "
             f"median of {args.repeat} (MB/s of uncompressed data). The run from the disk cache follows "
             "the run that filled it, with a remount between. Target: the run from the disk cache "
             f">= {TARGET}x the local copy.",
             "",
             "| array | " + " | ".join(RUNS) + " | from the disk cache / local | target "
             "| disk cache hits / misses (run from it) |",
             "|---|" + "---|" * (len(RUNS) + 3)]
    for cfg in configs:
        layout = "sharded" if cfg.sharded else "plain"
        speeds = [cfg.nbytes / statistics.median(seconds[layout, run]) / 1e6 for run in RUNS]
        ratio = speeds[3] / speeds[0]
        cells = " | ".join(f"{speed:.0f}" for speed in speeds)
        hits = ", ".join(f"{h} / {m}" for h, m in counted[layout])
        verdict = "ok" if ratio >= TARGET else "MISS"
        lines.append(f"| {layout} | {cells} | {ratio:.2f}x | {verdict} | {hits} |")
    return "\n".join(lines) + "\n"


def render_cpu(configs: list, cpu: Cpu) -> str:
    """The CPU each read took (medians): the S3 server (moto) and the proxy stand for a remote
    service but share this machine's cores with the daemon, which a real server would not."""
    lines = ["", "CPU during each read (ms, medians): the daemon's / the S3 server's and proxy's "
             "(moto and the proxy run on the same cores as the daemon; a remote server would not)",
             "", "| array | " + " | ".join(RUNS) + " |", "|---|" + "---|" * len(RUNS)]
    for cfg in configs:
        layout = "sharded" if cfg.sharded else "plain"
        cells = []
        for run in RUNS:
            daemon, serving = zip(*cpu[layout, run], strict=True)
            cells.append(f"{1000 * statistics.median(daemon):.0f} / {1000 * statistics.median(serving):.0f}")
        lines.append(f"| {layout} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
