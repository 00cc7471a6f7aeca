"""The command line of `benchmarks/latency.py`."""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from .common import VENV_BIN, log, parse_size, settle
from .latency import build, measure
from .latency_report import plot, render


def main(doc: str | None = None) -> None:
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=parse_size, default=parse_size("256M"))
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--delays", default="0,0.01", help="seconds per direction (0.01: 20 ms round trip)")
    p.add_argument("--layouts", default="both", choices=["both", "plain", "sharded"])
    p.add_argument("--cache", default="256M")
    p.add_argument("--zarrfs", default=str(VENV_BIN / "zarrfs"))
    p.add_argument("--azure", action=argparse.BooleanOptionalAction, default=True,
                   help="also zarrfs on Azurite (the 'zarrfs on Azure' column)")
    p.add_argument("--out", default=str(Path(tempfile.gettempdir()) / "zarrfs-latency.md"))
    a = p.parse_args()
    delays = [float(d) for d in a.delays.split(",")]
    work = Path(tempfile.mkdtemp(prefix="zarrfs-latency-", dir="/var/tmp"))
    shm = Path(tempfile.mkdtemp(prefix="zarrfs-latency-", dir="/dev/shm"))
    try:
        configs = [c for c in build(a.size, work, shm)
                   if a.layouts in ("both", "sharded" if c.sharded else "plain")]
        settle()
        logfile = Path(tempfile.gettempdir()) / "zarrfs-latency-daemon.log"
        figures = measure(configs, delays, a.repeat, a.zarrfs, work / "mnt", logfile, a.cache, a.azure)
    finally:
        shutil.rmtree(shm, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    out = Path(a.out)
    text = render(figures, delays, a.size, a.repeat)
    print(text)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text + "\n")
    png = plot(figures, delays, out.with_suffix(".png"))
    log(f"wrote {out} and {png}")
