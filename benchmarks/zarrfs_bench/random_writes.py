"""Random writes (benchmarks/random_writes.py): fio into `data` of fresh mounts, TensorStore
writing random ranges of the flat array beside it; MiB/s (2^20 B/s written, the final fsync
included), the daemon's peak RSS, and the peak PSS of the daemon and every process below it
(its decoding processes) together, which the memory bound is about."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from .arrays import gen_array, shape_for, ts_context, ts_create_spec
from .common import VENV_BIN, MiB, fmt_size, log, median, parse_size
from .mounting import Mount

CHUNK = 512
SHARD = 4096
SIZES = (4 << 10, 256 << 10)  # fio's --bsrange, 4 KiB aligned


def parse_args(doc: str | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=parse_size, default=parse_size("256M"))
    p.add_argument("--runtime", type=float, default=8.0, help="seconds of writes per run (then fsync)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--cache", default="256M", help="-o cache= of every mount")
    p.add_argument("--layouts", default="plain,sharded")
    p.add_argument("--engines", default="psync,mmap")
    p.add_argument("--workdir", default="/var/tmp", help="where the arrays are built (not tmpfs)")
    p.add_argument("--out", default=str(Path(tempfile.gettempdir()) / "zarrfs-random-writes.md"))
    return p.parse_args()


def build(work: Path, layout: str, size: int) -> tuple[Path, tuple[int, int]]:
    import tensorstore as ts

    shape = shape_for(size, 2)
    path = work / f"uint16-zstd-{layout}"
    shards = (SHARD, SHARD) if layout == "sharded" else None
    spec = ts_create_spec(path, "uint16", shape, (CHUNK, CHUNK), shards, "zstd")
    ts.open(spec, create=True, context=ts_context()).result().write(gen_array("uint16", shape, 1)).result()
    log(f"built {layout} {shape}")
    return path, shape


def fio(src: Path, work: Path, engine: str, args: argparse.Namespace) -> tuple[float, int, int]:
    """MiB/s of one fio run on a fresh copy and mount, the daemon's peak RSS, and the mount's
    processes' peak PSS."""
    dst = work / "copy"
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    try:
        with Mount(str(VENV_BIN / "zarrfs"), dst, work / "mp", f"cache={args.cache}",
                   logfile=work / "daemon.log") as m:
            t0 = time.perf_counter()
            out = subprocess.run(
                ["fio", "--name=w", f"--filename={m.mp / 'data'}", "--rw=randwrite",
                 f"--bsrange={SIZES[0]}-{SIZES[1]}", f"--ioengine={engine}", f"--size={args.size}",
                 "--time_based", f"--runtime={args.runtime:g}", "--end_fsync=1", "--fallocate=none",
                 "--allow_file_create=0", "--randrepeat=0", "--output-format=json"],
                capture_output=True, text=True, timeout=600, check=True)
            seconds = time.perf_counter() - t0
        written = json.loads(out.stdout)["jobs"][0]["write"]["io_bytes"]
        return written / seconds / MiB, m.peak_rss, m.peak_pss
    finally:
        shutil.rmtree(dst, ignore_errors=True)


def tensorstore(src: Path, work: Path, shape: tuple[int, int], runtime: float) -> float:
    """MiB/s of TensorStore writing random 4 KiB-aligned ranges of the flat array (as rows:
    the partial first, the whole ones, the partial last), each write stored before the next."""
    import tensorstore as ts

    dst = work / "ts-copy"
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    arr = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(dst)}},
                  open=True, write=True, context=ts_context()).result()
    rng = np.random.default_rng()
    total, row = shape[0] * shape[1], shape[1]
    written, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < runtime:
        count = int(rng.integers(SIZES[0] // 4096, SIZES[1] // 4096 + 1)) * 2048  # elements
        first = int(rng.integers(0, (total - count) // 2048 + 1)) * 2048
        values = rng.integers(0, 4000, count, dtype="<u2")
        for start, stop in _rows(first, first + count, row):
            r0, c0 = divmod(start, row)
            r1 = -(-stop // row)
            piece = values[start - first : stop - first]
            if r1 - r0 == 1:
                arr[r0, c0 : c0 + len(piece)].write(piece).result()
            else:
                arr[r0:r1].write(piece.reshape(r1 - r0, row)).result()
        written += count * 2
    seconds = time.perf_counter() - t0
    shutil.rmtree(dst, ignore_errors=True)
    return written / seconds / MiB


def _rows(start: int, stop: int, row: int) -> list[tuple[int, int]]:
    """[start, stop) of a flat C-order array as ranges that are part of one row or whole rows."""
    pieces = []
    if start % row:
        head = min(stop, start - start % row + row)
        pieces.append((start, head))
        start = head
    whole = start + (stop - start) // row * row
    if whole > start:
        pieces.append((start, whole))
    if stop > whole:
        pieces.append((whole, stop))
    return pieces


def main(doc: str | None) -> None:
    args = parse_args(doc)
    if shutil.which("fio") is None:
        raise SystemExit("fio is not installed")
    work = Path(tempfile.mkdtemp(prefix="zarrfs-random-writes-", dir=args.workdir))
    rows = []
    try:
        for layout in args.layouts.split(","):
            src, shape = build(work, layout, args.size)
            ts_runs = [tensorstore(src, work, shape, args.runtime) for _ in range(args.repeat)]
            for engine in args.engines.split(","):
                runs = [fio(src, work, engine, args) for _ in range(args.repeat)]
                log(f"{layout} {engine}: " + ", ".join(
                    f"{r:.1f} MiB/s (RSS {fmt_size(rss)}, PSS {fmt_size(pss)})" for r, rss, pss in runs))
                rows.append((layout, engine, [r for r, _, _ in runs], [(rss, pss) for _, rss, pss in runs],
                             ts_runs))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report = _report(args, rows)
    Path(args.out).write_text(report)
    print(report)
    log(f"wrote {args.out}")


Row = tuple[str, str, list[float], list[tuple[int, int]], list[float]]


def _report(args: argparse.Namespace, rows: list[Row]) -> str:
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    lines = [
        "# zarrfs random writes", "",
        f"{time.strftime('%Y-%m-%d %H:%M')}; {fmt_size(args.size)} uint16 zstd, fio --bsrange=4k-256k "
        f"for {args.runtime:g} s then fsync, `-o cache={args.cache}`; medians of {args.repeat}; "
        f"load average at the end: {load}.", "",
        "| layout | fio engine | zarrfs MiB/s | runs | TensorStore MiB/s (each write durable) "
        "| daemon peak RSS | peak PSS, daemon and its processes (each run) |",
        "|---|---|---|---|---|---|---|",
    ]
    for layout, engine, runs, peaks, ts_runs in rows:
        lines.append(f"| {layout} | {engine} | {median(runs):.1f} | {', '.join(f'{r:.1f}' for r in runs)} "
                     f"| {median(ts_runs):.1f} | {fmt_size(max(rss for rss, _ in peaks))} "
                     f"| {', '.join(fmt_size(pss) for _, pss in peaks)} |")
    return "\n".join(lines) + "\n"
