"""Units, the targets, logging, timing and small file helpers shared by every section."""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

PKG = Path(__file__).resolve().parent
HERE = PKG.parent  # benchmarks/
REPO = HERE.parent
RUN_PY = HERE / "run.py"
VENV_BIN = Path(sys.executable).parent
MiB = 1 << 20
GiB = 1 << 30
MB = 1e6

# The targets, printed beside the ratios.
T_COLD = 1.0  # cold dd of data >= 1.0x TensorStore's whole-array read
T_MEMMAP = 0.8  # np.memmap sum over data, cold >= 0.8x TensorStore's read
T_WRITE = 0.7  # dd conv=notrunc,fsync >= 0.7x TensorStore's write ...
T_WRITE_AIM = 1.0  # ... and 1.0x is the aim
T_S3 = 1.0  # cold dd of an array on S3 >= 1.0x TensorStore's s3 kvstore
T_RSS_SLACK = 100 * MiB  # daemon peak RSS <= cache + 100 MiB, in every benchmark
T_GROUP_MOUNT = 2.0  # seconds for `zarrfs mount` of the group to return (serving)
T_GROUP_LS = 1.0  # seconds for `ls` of the group's root on a fresh mount
# Kept from before the issue ("keep what is there").
T_WARM = 1.0  # warm dd re-read >= 1.0x tmpfs dd
T_RAND = 15000  # random 4 KiB preads per second
T_RECHECK = 0.95  # cold dd with recheck=open >= 0.95x the same with recheck=never

WARM_RUNS = 3  # warm and tmpfs dd runs per repeat (they are short, hence noisy)


def log(*a: Any) -> None:
    print(f"[{time.strftime('%H:%M:%S')}]", *a, file=sys.stderr, flush=True)


def parse_size(s: str) -> int:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgGtT]?)(?:i?[bB])?\s*", s)
    if not m:
        raise argparse.ArgumentTypeError(f"bad size {s!r} (e.g. 256M, 2G)")
    mult = {"": 1, "k": 1 << 10, "m": MiB, "g": GiB, "t": 1 << 40}[m.group(2).lower()]
    return int(float(m.group(1)) * mult)


def fmt_size(n: float) -> str:
    for unit, div in (("GiB", GiB), ("MiB", MiB), ("KiB", 1024)):
        if abs(n) >= div:
            return f"{n / div:.4g} {unit}"
    return f"{int(n)} B"


def median(xs: list[float]) -> float | None:
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def alternated_medians(cases: dict[str, Callable[[], float]], repeat: int) -> dict[str, float]:
    """Each case's median over `repeat` rounds, one run of every case a round (so that a slow
    spell of the machine falls on all of them alike)."""
    found: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(repeat):
        for name, action in cases.items():
            found[name].append(action())
    return {name: statistics.median(values) for name, values in found.items()}


def kernel_window_setting(mountpoint: Path) -> Path:
    """The file holding the kernel's read-ahead window (KiB) of the mount at `mountpoint`."""
    device = mountpoint.stat().st_dev
    return Path(f"/sys/class/bdi/{os.major(device)}:{os.minor(device)}/read_ahead_kb")


def join_opts(*parts: str) -> str:
    """Mount options joined with commas, empty parts left out (later options win)."""
    return ",".join(p for p in parts if p)


def run_checked(cmd: list[str], timeout: float = 600,
                env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited with {r.returncode}: {r.stderr.strip()[-800:]}")
    return r


def dd(
    src: Path | str, dst: Path | str, *extra: str, expect: int | None = None, timeout: float = 600
) -> float:
    """Seconds for one dd bs=1M run (checks the byte count dd reports)."""
    cmd = ["dd", f"if={src}", f"of={dst}", "bs=1M", *extra]
    t0 = time.perf_counter()
    r = run_checked(cmd, timeout=timeout)
    dt = time.perf_counter() - t0
    m = re.search(r"^(\d+) bytes", r.stderr, re.M)
    copied = int(m.group(1)) if m else -1
    if expect is not None and copied != expect:
        raise RuntimeError(f"dd copied {copied} bytes, expected {expect}")
    return dt


def cpu_seconds(pid: int) -> float:
    """The CPU time process `pid` has used so far (user and system, its threads included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def process_cpu(pids: list[int]) -> float:
    """CPU seconds (user and system) these processes have spent so far (those gone: none)."""
    total = 0.0
    for pid in pids:
        try:
            total += cpu_seconds(pid)
        except OSError:
            continue
    return total


def command(pid: int) -> str:
    """A process's command line, as one string ("" once it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def own_cpu() -> float:
    """This process's CPU so far (every thread's), and its children's that ended (dd's)."""
    return sum(used.ru_utime + used.ru_stime for used in
               (resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)))


def fs_type(path: Path) -> str:
    """The type of the file system that holds `path` (from /proc/self/mountinfo)."""
    best, typ = "", "?"
    real = os.path.realpath(path)
    with open("/proc/self/mountinfo") as f:
        for line in f:
            parts = line.split()
            mp = parts[4]
            fstype = parts[parts.index("-") + 1]
            if (real == mp or real.startswith(mp.rstrip("/") + "/")) and len(mp) >= len(best):
                best, typ = mp, fstype
    return typ


def dir_files(path: Path) -> list[Path]:
    return [p for p in sorted(path.rglob("*")) if p.is_file()]


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in dir_files(path))


def settle() -> None:
    """Write what this run wrote to disk now: the kernel's flusher would otherwise write it
    back about 30 s later, during a measurement (the first array's cold `dd`, measured ~30 s
    after the arrays were built, ran at 0.52-0.59x TensorStore where it runs at ~0.75x)."""
    os.sync()


def warm_files(path: Path) -> None:
    """Read every file under `path` once, so the compressed bytes are in the page cache."""
    buf = bytearray(8 * MiB)
    for p in dir_files(path):
        with open(p, "rb", buffering=0) as f:
            while f.readinto(buf):
                pass
