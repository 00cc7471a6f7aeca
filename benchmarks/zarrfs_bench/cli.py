"""The command line of `benchmarks/run.py`."""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

from . import tables
from .common import HERE, VENV_BIN, GiB, MiB, log, parse_size
from .context import Bench
from .plot import plot
from .report import Report
from .runner import run


def parse_args(doc: str | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=parse_size, default=None, help="bytes per array (default 256M)")
    p.add_argument("--repeat", type=int, default=None, help="runs per read figure (default 5)")
    p.add_argument("--write-repeat", type=int, default=None,
                   help="runs per write figure (default min(repeat, 3))")
    p.add_argument("--big", type=parse_size, default=None,
                   help="array streamed for the memory figure (default 2G)")
    p.add_argument("--shard-size", type=parse_size, default=GiB,
                   help="uncompressed shard of the big array for the sharding figure "
                   "(default 1G; at most half of --big)")
    p.add_argument("--cache", default="256M",
                   help="cache= option of every mount (default 256M); the RSS target is this + 100 MiB")
    p.add_argument("--mount-opts", default="", help="-o options for every mount, e.g. readahead=1024")
    p.add_argument("--codecs", default="zstd,blosc", help="zstd,blosc")
    p.add_argument("--layouts", default="both", choices=["both", "plain", "sharded"])
    p.add_argument("--random-reads", type=int, default=2000)
    p.add_argument("--quick", action="store_true", help="32 MiB arrays, 2 repeats, 256 MiB big")
    p.add_argument("--out", help="the markdown report (default $TMPDIR/zarrfs-bench.md); "
                   "the plot goes beside it (.png)")
    p.add_argument("--workdir", help="where to build the arrays (default $TMPDIR; not tmpfs)")
    p.add_argument("--zarrfs", default=str(VENV_BIN / "zarrfs"))
    p.add_argument("--skip-zarrfs", action="store_true", help="baselines only")
    p.add_argument("--skip-writes", action="store_true")
    p.add_argument("--skip-reads", action="store_true", help="no whole-array read figures (writes alone)")
    p.add_argument("--skip-s3", action="store_true", help="no S3 figures")
    p.add_argument("--s3-config", default="uint16/zstd/plain",
                   help="the array read from S3 (default uint16/zstd/plain, else the first built)")
    p.add_argument("--skip-big", action="store_true", help="no memory and sharding figures")
    p.add_argument("--skip-group", action="store_true", help="no group mount/ls figures")
    p.add_argument("--skip-small", action="store_true", help="no small-chunk figures")
    p.add_argument("--only-group", action="store_true",
                   help="only the group figures: mount and ls of a group of --group-arrays small arrays")
    p.add_argument("--group-arrays", type=int, default=10000, help="arrays in the group (default 10000)")
    p.add_argument("--data-dir",
                   help="where the groups are cached between runs (default zarrfs-bench-data beside "
                   "the work dir)")
    p.add_argument("--profile", action="store_true",
                   help="also run one cold read with the daemon under py-spy")
    p.add_argument("--profile-config", default="uint16/zstd/plain")
    p.add_argument("--profile-native", action="store_true", help="py-spy --native")
    p.add_argument("--profile-dir", default=str(HERE / "profiles"))
    p.add_argument("--keep", action="store_true", help="keep the work directories")
    p.add_argument("--rss-kill", type=parse_size, default=parse_size("4G"),
                   help="kill a daemon whose RSS passes this (default 4G; 0: never)")
    a = p.parse_args()
    a.size = a.size or (32 * MiB if a.quick else 256 * MiB)
    a.repeat = a.repeat or (2 if a.quick else 5)
    a.write_repeat = a.write_repeat or min(a.repeat, 3)
    a.big = a.big or (256 * MiB if a.quick else 2 * GiB)
    a.shard_size = min(a.shard_size, a.big // 2)
    a.codecs = [c.strip() for c in a.codecs.split(",") if c.strip()]
    a.out = Path(a.out) if a.out else Path(tempfile.gettempdir()) / "zarrfs-bench.md"
    try:
        parse_size(a.cache)
    except argparse.ArgumentTypeError as e:
        p.error(f"--cache: {e}")
    if a.only_group:
        a.skip_writes = a.skip_big = a.skip_s3 = a.skip_small = True
    return a


def main(doc: str | None = None) -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--_worker":
        from .workers import worker_main

        worker_main(sys.argv[2:])
        return
    a = parse_args(doc)
    if not a.skip_zarrfs:
        r = subprocess.run([a.zarrfs, "--help"], capture_output=True, text=True)
        if r.returncode != 0:
            log(f"`zarrfs --help` fails ({r.stderr.strip().splitlines()[-1:]}); running the baselines only")
            a.skip_zarrfs = True
    b = Bench(a)
    prev = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        run(b)
    except BaseException as e:
        if not isinstance(e, KeyboardInterrupt):
            traceback.print_exc()
        b.res.err("benchmark aborted", e)
    finally:
        b.cleanup()
        signal.signal(signal.SIGTERM, prev)
    png = a.out.with_suffix(".png")
    try:
        drawn = plot(b, png)
    except Exception as e:
        b.res.err("plot", e)
        drawn = None
    text = Report(b, tables.targets(b), tables.SECTIONS, drawn).render()
    print(text)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(text + "\n")
    log(f"wrote {a.out}" + (f" and {drawn}" if drawn else " (nothing to plot)") + f"; daemon log {b.logfile}")
