#!/usr/bin/env python3
"""zarrfs benchmark: reading, writing, memory and sharding cost against TensorStore,
zarr-python 3 and a plain tmpfs copy, in one run.

    .venv/bin/python benchmarks/run.py [--size 256M] [--repeat 5] [--out results.md]
    .venv/bin/python benchmarks/run.py --quick            # 32 MiB, 2 repeats: smoke test
    .venv/bin/python benchmarks/run.py --profile          # + py-spy profile of a cold read
    .venv/bin/python benchmarks/run.py --only-group       # mount + ls of 10,000 small arrays

The arrays are built by TensorStore in a temporary directory on the local disk; the same
values as raw little-endian C-order files go to /dev/shm. Every reader starts with the
compressed files in the page cache (they are read once before each measurement); the page
cache of the *mount* is dropped between cold runs by mounting afresh. Figures are medians of
--repeat runs; MB/s are 10^6 bytes per second of uncompressed array data.

See benchmarks/README.md for what each figure means.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import platform
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
VENV_BIN = Path(sys.executable).parent
MiB = 1 << 20
GiB = 1 << 30
MB = 1e6

# Targets printed beside the ratios.
T_COLD = 1.0  # cold dd read >= 1.0x TensorStore
T_RECHECK = 0.95  # cold dd with recheck=open >= 0.95x the same with recheck=never
T_WARM = 1.0  # warm dd read >= 1.0x tmpfs dd
T_RAND = 15000  # random 4 KiB preads per second
T_WRITE = 0.5  # dd write + fsync >= 0.5x TensorStore write
T_RSS_SLACK = 100 * MiB  # VmHWM <= cache + 100 MiB
T_GROUP_MOUNT = 2.0  # seconds for `zarrfs mount` of the group to return (serving)
T_GROUP_LS = 1.0  # seconds for `ls` of the group's root on a fresh mount

WARM_RUNS = 3  # warm and tmpfs dd runs per repeat (they are short, hence noisy)
INNER = 512  # inner chunk edge (elements): 512 KiB for uint16, 1 MiB for float32
GROUP_RUNS = 3  # fresh mounts per group figure
GROUP_LAYOUT = 1  # bump when write_group changes: the cached groups are then rebuilt


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


# --------------------------------------------------------------------------------------------
# Data and arrays
# --------------------------------------------------------------------------------------------


def shape_for(nbytes: int, itemsize: int) -> tuple[int, int]:
    """A 2-D shape of about `nbytes`: a power-of-two number of columns near the square root."""
    n = max(1, nbytes // itemsize)
    cols = 1 << max(9, round(np.log2(np.sqrt(n))))
    if n // cols >= cols * 2:
        cols *= 2
    rows = max(1, n // cols)
    return rows, cols


def gen_rows(dtype: str, r0: int, r1: int, cols: int, seed: int) -> np.ndarray:
    """Rows [r0, r1) of a smooth field plus ~3.6 bits of noise, quantized: compressible
    (uint16 ~1.4x with zstd-1, ~1.9x with blosc shuffle; float32 ~3x) but not trivially.
    Deterministic for a given (seed, r0, r1)."""
    ph = np.random.default_rng(seed).uniform(0, 2 * np.pi, 4).astype(np.float32)
    i = np.arange(r0, r1, dtype=np.float32)
    j = np.arange(cols, dtype=np.float32)
    a = 3000 * np.sin(i / 211 + ph[0])
    b = 400 * np.cos(j / 337 + ph[1])
    c = np.sin(i / 53 + ph[2])
    d = 150 * np.cos(j / 71 + ph[3])
    f = a[:, None] + b[None, :]
    f += c[:, None] * d[None, :]
    np.round(f, out=f)
    f += np.random.default_rng([seed, r0]).integers(0, 12, size=f.shape, dtype=np.uint8)
    if dtype == "uint16":
        f += 32768
        return f.astype("<u2")
    f /= 64
    return f.astype("<f4")


def gen_array(
    dtype: str, shape: tuple[int, int], seed: int, out: np.ndarray | None = None, row0: int = 0
) -> np.ndarray:
    rows, cols = shape
    if out is None:
        out = np.empty(shape, dtype="<u2" if dtype == "uint16" else "<f4")
    step = 1024
    for r in range(0, rows, step):
        out[r : r + step] = gen_rows(dtype, row0 + r, row0 + min(rows, r + step), cols, seed)
    return out


BIG_PIECE = 1024


@functools.cache
def big_base(cols: int) -> np.ndarray:
    """The big array is this block of rows repeated, plus 1 per repetition: generating 2 GiB
    of fresh values would take longer than the measurements made on them."""
    return gen_rows("uint16", 0, BIG_PIECE, cols, seed=3)


def codec_json(codec: str, itemsize: int) -> dict[str, Any]:
    if codec == "zstd":
        return {"name": "zstd", "configuration": {"level": 1, "checksum": False}}
    if codec == "blosc":
        return {
            "name": "blosc",
            "configuration": {
                "cname": "lz4",
                "clevel": 5,
                "shuffle": "shuffle",
                "typesize": itemsize,
                "blocksize": 0,
            },
        }
    raise ValueError(codec)


def ts_create_spec(
    path: Path,
    dtype: str,
    shape: tuple[int, ...],
    chunks: tuple[int, ...],
    shards: tuple[int, ...] | None,
    codec: str,
) -> dict[str, Any]:
    itemsize = np.dtype(dtype).itemsize
    inner = [{"name": "bytes", "configuration": {"endian": "little"}}, codec_json(codec, itemsize)]
    if shards:
        codecs = [
            {
                "name": "sharding_indexed",
                "configuration": {
                    "chunk_shape": list(chunks),
                    "codecs": inner,
                    "index_codecs": [
                        {"name": "bytes", "configuration": {"endian": "little"}},
                        {"name": "crc32c"},
                    ],
                    "index_location": "end",
                },
            }
        ]
        grid = shards
    else:
        codecs, grid = inner, chunks
    return {
        "driver": "zarr3",
        "kvstore": {"driver": "file", "path": str(path)},
        "metadata": {
            "shape": list(shape),
            "data_type": dtype,
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(grid)}},
            "chunk_key_encoding": {"name": "default"},
            "codecs": codecs,
            "fill_value": 0,
        },
    }


def ts_context() -> Any:
    import tensorstore as ts

    return ts.Context({"cache_pool": {"total_bytes_limit": 0}})


def ts_open(path: Path, write: bool = False) -> Any:
    import tensorstore as ts

    spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path)}}
    return ts.open(spec, open=True, read=True, write=write, context=ts_context()).result()


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def warm_files(path: Path) -> None:
    """Read every file under `path` once, so the compressed bytes are in the page cache."""
    buf = bytearray(8 * MiB)
    for p in sorted(path.rglob("*")):
        if p.is_file():
            with open(p, "rb", buffering=0) as f:
                while f.readinto(buf):
                    pass


def write_group(path: Path, n: int, zarr_format: int) -> None:
    """A group of `n` small arrays (`a00000`, ...: 16 float32 each, one uncompressed chunk,
    attributes {"index": i}) with consolidated metadata (v2 `.zmetadata`; v3 inline in the
    root zarr.json), written directly: zarr-python takes minutes for 10,000 arrays."""
    values = np.arange(16, dtype="<f4")
    members: dict[str, Any] = {}
    for i in range(n):
        name = f"a{i:05d}"
        d = path / name
        d.mkdir(parents=True)
        attrs = {"index": i}
        if zarr_format == 2:
            meta: dict[str, Any] = {
                "zarr_format": 2,
                "shape": [16],
                "chunks": [16],
                "dtype": "<f4",
                "compressor": None,
                "fill_value": 0.0,
                "filters": None,
                "order": "C",
                "dimension_separator": ".",
            }
            (d / ".zarray").write_text(json.dumps(meta, indent=4))
            (d / ".zattrs").write_text(json.dumps(attrs, indent=4))
            members[f"{name}/.zarray"] = meta
            members[f"{name}/.zattrs"] = attrs
            (d / "0").write_bytes((values + i).tobytes())
        else:
            meta = {
                "zarr_format": 3,
                "node_type": "array",
                "shape": [16],
                "data_type": "float32",
                "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [16]}},
                "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
                "fill_value": 0.0,
                "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
                "attributes": attrs,
            }
            (d / "zarr.json").write_text(json.dumps(meta, indent=4))
            members[name] = meta
            (d / "c").mkdir()
            (d / "c" / "0").write_bytes((values + i).tobytes())
    if zarr_format == 2:
        (path / ".zgroup").write_text(json.dumps({"zarr_format": 2}, indent=4))
        members[".zgroup"] = {"zarr_format": 2}
        consolidated = {"metadata": members, "zarr_consolidated_format": 1}
        (path / ".zmetadata").write_text(json.dumps(consolidated, indent=4))
    else:
        root = {
            "zarr_format": 3,
            "node_type": "group",
            "attributes": {},
            "consolidated_metadata": {"kind": "inline", "must_understand": False, "metadata": members},
        }
        (path / "zarr.json").write_text(json.dumps(root, indent=4))


@dataclass
class Config:
    dtype: str
    codec: str
    sharded: bool
    shape: tuple[int, int]
    chunks: tuple[int, int]
    shards: tuple[int, int] | None
    path: Path
    raw: Path  # the array's bytes on /dev/shm
    raw2: Path  # other values of the same shape (for the write test)
    nbytes: int = 0
    stored: int = 0

    @property
    def name(self) -> str:
        return f"{self.dtype}/{self.codec}/{'sharded' if self.sharded else 'plain'}"

    @property
    def slug(self) -> str:
        return self.name.replace("/", "-")


# --------------------------------------------------------------------------------------------
# Mounting
# --------------------------------------------------------------------------------------------


def mounted(mp: Path) -> bool:
    target = os.path.realpath(mp)
    with open("/proc/self/mountinfo") as f:
        for line in f:
            parts = line.split()
            if len(parts) > 4 and parts[4].replace("\\040", " ") == target:
                return True
    return False


def proc_status(pid: int, key: str) -> int | None:
    """A `kB` field of /proc/<pid>/status, in bytes."""
    with contextlib.suppress(OSError), open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return None


def proc_io(pid: int) -> dict[str, int]:
    with open(f"/proc/{pid}/io") as f:
        return {k: int(v) for k, v in (line.split(":") for line in f)}


class MountError(RuntimeError):
    pass


class Mount:
    """`zarrfs mount SOURCE MP -f` in a child process (optionally under py-spy).

    Entering waits until the mount is in /proc/self/mountinfo; leaving always unmounts with
    fusermount3 -u and waits for the daemon to flush and exit (killing only our own child
    process if it will not)."""

    active: list[Mount] = []

    def __init__(
        self,
        zarrfs: str,
        source: Path,
        mp: Path,
        opts: str = "",
        logfile: Path | None = None,
        exit_timeout: float = 180.0,
        rss_limit: int = 0,
    ) -> None:
        self.zarrfs, self.source, self.mp, self.opts = zarrfs, source, mp, opts
        self.rss_limit = rss_limit
        self.peak_rss = 0
        self.killed_for_rss: int | None = None
        self._stop_watch = threading.Event()
        self._watch: threading.Thread | None = None
        self.logfile = logfile or mp.with_suffix(".log")
        self.exit_timeout = exit_timeout
        self.proc: subprocess.Popen[bytes] | None = None
        self.spy: subprocess.Popen[bytes] | None = None
        self.pid: int | None = None  # the daemon's pid
        self.unmount_seconds: float | None = None
        self.returncode: int | None = None

    def __enter__(self) -> Mount:
        self.mp.mkdir(parents=True, exist_ok=True)
        if mounted(self.mp):
            raise MountError(f"{self.mp} is already a mount point")
        cmd = [self.zarrfs, "mount", str(self.source), str(self.mp), "-f"]
        if self.opts:
            cmd += ["-o", self.opts]
        self._log = open(self.logfile, "ab")
        self._log.write(("\n$ " + " ".join(cmd) + "\n").encode())
        self._log.flush()
        self.proc = subprocess.Popen(
            cmd,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        Mount.active.append(self)
        deadline = time.monotonic() + 30
        try:
            while not mounted(self.mp):
                if self.proc.poll() is not None:
                    raise MountError(f"zarrfs mount exited with {self.proc.returncode}: {self.log_tail()}")
                if time.monotonic() > deadline:
                    raise MountError(f"not mounted after 30 s: {self.log_tail()}")
                time.sleep(0.02)
            self.pid = self.proc.pid
            self._watch = threading.Thread(target=self._watch_rss, daemon=True)
            self._watch.start()
            # zarr.json must be served before we time anything.
            run_checked(["stat", "-c", "%s", str(self.mp / "zarr.json")], timeout=30)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        if exc_type is not None:
            # Something failed (a read timed out?): the daemon may be stuck, do not wait long.
            self.exit_timeout = min(self.exit_timeout, 15)
        self.close()
        if self.killed_for_rss:
            raise RuntimeError(
                f"daemon killed by the benchmark: RSS {fmt_size(self.killed_for_rss)}"
                f" > --rss-kill {fmt_size(self.rss_limit)}"
            )

    def _watch_rss(self) -> None:
        """Track the daemon's peak RSS; kill it (our own child) past --rss-kill, so that a
        leaking daemon cannot take the shared machine down."""
        proc, pid = self.proc, self.pid
        while not self._stop_watch.wait(0.05):
            if proc is None or pid is None or proc.poll() is not None:
                return
            rss = proc_status(pid, "VmRSS") or 0
            self.peak_rss = max(self.peak_rss, rss)
            if self.rss_limit and rss > self.rss_limit:
                log(f"ERROR: daemon {pid} RSS {fmt_size(rss)} > {fmt_size(self.rss_limit)}: killing it")
                self.killed_for_rss = rss
                proc.kill()
                return

    def start_profile(self, out: Path, native: bool = False) -> None:
        """Attach py-spy to the daemon (so start-up is not in the profile)."""
        cmd = [
            str(VENV_BIN / "py-spy"),
            "record",
            "--nonblocking",
            "--pid",
            str(self.pid),
            "-r",
            "200",
            "-f",
            "raw",
            "-o",
            str(out),
        ]
        if native:
            cmd.append("--native")
        self.spy = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
        time.sleep(1.5)  # let it attach
        if self.spy.poll() is not None:
            raise RuntimeError(f"py-spy exited: {self.spy.stdout.read().decode()[-500:]}")

    def stop_profile(self) -> None:
        if self.spy is None:
            return
        self.spy.send_signal(signal.SIGINT)
        try:
            self.spy.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.spy.kill()
            self.spy.wait()
        self.spy = None

    def log_tail(self, n: int = 1500) -> str:
        with contextlib.suppress(OSError):
            self._log.flush()
            return self.logfile.read_bytes()[-n:].decode(errors="replace").strip()
        return ""

    def close(self) -> None:
        if self.proc is None:
            return
        self.stop_profile()
        self._stop_watch.set()
        if self.pid is not None:
            self.peak_rss = max(self.peak_rss, proc_status(self.pid, "VmHWM") or 0)
        t0 = time.perf_counter()
        try:
            for _ in range(20):
                if not mounted(self.mp):
                    break
                r = subprocess.run(["fusermount3", "-u", str(self.mp)], capture_output=True)
                if r.returncode == 0:
                    break
                time.sleep(0.25)  # busy: a worker of ours may still be closing the file
            else:
                log(f"WARNING: {self.mp} busy, lazy unmount")
                subprocess.run(["fusermount3", "-u", "-z", str(self.mp)], capture_output=True)
            try:
                self.proc.wait(timeout=self.exit_timeout)
            except subprocess.TimeoutExpired:
                log(
                    f"WARNING: daemon {self.proc.pid} did not exit {self.exit_timeout:.0f} s after "
                    "unmount; SIGTERM"
                )
                os.kill(self.proc.pid, signal.SIGTERM)
                try:
                    self.proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    os.kill(self.proc.pid, signal.SIGKILL)
                    self.proc.wait()
            if mounted(self.mp):  # the daemon died without unmounting
                subprocess.run(["fusermount3", "-u", "-z", str(self.mp)], capture_output=True)
        finally:
            self.unmount_seconds = time.perf_counter() - t0
            self.returncode = self.proc.returncode
            self.proc = None
            self._log.close()
            if self in Mount.active:
                Mount.active.remove(self)


def run_checked(cmd: list[str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited with {r.returncode}: {r.stderr.strip()[-800:]}")
    return r


def daemon_pid(mp: Path) -> int | None:
    """The pid of the daemon serving `mp` (a `zarrfs mount` started by us without -f)."""
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            with contextlib.suppress(OSError):
                argv = (d / "cmdline").read_bytes().split(b"\0")
                if b"mount" in argv and str(mp).encode() in argv:
                    return int(d.name)
    return None


def unmount_daemon(mp: Path, pid: int | None, timeout: float = 60) -> None:
    """fusermount3 -u, then wait for the daemon (ours) to exit; SIGTERM/SIGKILL if it will not."""
    for _ in range(20):
        if not mounted(mp):
            break
        if subprocess.run(["fusermount3", "-u", str(mp)], capture_output=True).returncode == 0:
            break
        time.sleep(0.25)
    else:
        subprocess.run(["fusermount3", "-u", "-z", str(mp)], capture_output=True)
    if pid is None:
        return
    deadline = time.monotonic() + timeout
    for sig in (None, signal.SIGTERM, signal.SIGKILL):
        if sig is not None:
            log(f"WARNING: daemon {pid} still running after unmount; {sig.name}")
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
            deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if not Path(f"/proc/{pid}").exists() or proc_status(pid, "VmRSS") is None:
                return
            time.sleep(0.05)


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


def worker(*args: str, timeout: float = 600) -> dict[str, Any]:
    """Run a measurement in a child python (a hung mount cannot hang the benchmark)."""
    r = run_checked([sys.executable, str(Path(__file__).resolve()), "--_worker", *args], timeout=timeout)
    return json.loads(r.stdout.strip().splitlines()[-1])


def worker_main(argv: list[str]) -> None:
    kind = argv[0]
    if kind == "memmap_sum":
        path, dtype = argv[1], argv[2]
        t0 = time.perf_counter()
        m = np.memmap(path, dtype=dtype, mode="r")
        s = m.sum()
        dt = time.perf_counter() - t0
        print(json.dumps({"seconds": dt, "sum": float(s), "n": int(m.size)}))
    elif kind == "pread":
        path, raw, n, seed = argv[1], argv[2], int(argv[3]), int(argv[4])
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
        print(json.dumps({"seconds": dt, "n": n, "mismatches": bad}))
    elif kind == "read_page":
        path, off, length, fadvise = argv[1], int(argv[2]), int(argv[3]), argv[4] == "1"
        fd = os.open(path, os.O_RDONLY)
        if fadvise:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        b = os.pread(fd, length, off)
        os.close(fd)
        print(json.dumps({"hex": b.hex()}))
    else:
        raise SystemExit(f"unknown worker {kind}")


# --------------------------------------------------------------------------------------------
# The benchmark
# --------------------------------------------------------------------------------------------


def fs_type(path: Path) -> str:
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


@dataclass
class Results:
    rows: dict[str, dict[str, Any]] = field(default_factory=dict)  # config name -> metrics
    errors: list[str] = field(default_factory=list)
    memory: dict[str, Any] = field(default_factory=dict)
    shard: dict[str, Any] = field(default_factory=dict)
    profile: dict[str, Any] = field(default_factory=dict)
    groups: dict[str, dict[str, Any]] = field(default_factory=dict)  # "v2"/"v3" -> figures

    def add(self, cfg: str, key: str, value: Any) -> None:
        self.rows.setdefault(cfg, {}).setdefault(key, []).append(value)

    def err(self, what: str, e: BaseException) -> None:
        msg = f"{what}: {type(e).__name__}: {e}"
        log("ERROR", msg)
        self.errors.append(msg)


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.res = Results()
        self.zarrfs_ok = not args.skip_zarrfs
        self.mount_failures = 0
        base = Path(args.workdir) if args.workdir else Path(tempfile.gettempdir())
        if fs_type(base) in ("tmpfs", "ramfs"):
            base = Path("/var/tmp")
        self.work = Path(tempfile.mkdtemp(prefix="zarrfs-bench-", dir=base))
        args.data_dir = args.data_dir or str(base / "zarrfs-bench-data")  # kept: cached groups
        self.shm = Path(tempfile.mkdtemp(prefix="zarrfs-bench-", dir="/dev/shm"))
        self.mnt = self.work / "mnt"
        self.mnt.mkdir()
        # Daemon output, kept after the run (the work directory is not).
        self.logfile = Path(tempfile.gettempdir()) / "zarrfs-bench-daemon.log"
        self.logfile.write_bytes(b"")
        self.configs: list[Config] = []
        self.nmount = 0

    # -- helpers ----------------------------------------------------------------------------

    def mount(self, source: Path, opts: str | None = None, **kw: Any) -> Mount:
        self.nmount += 1
        mp = self.mnt / f"m{self.nmount}"
        o = self.args.mount_opts if opts is None else opts
        return Mount(
            self.args.zarrfs,
            source,
            mp,
            o,
            logfile=self.logfile,
            rss_limit=self.args.rss_kill,
            **kw,
        )

    def zarrfs_try(self, what: str, fn: Any, *a: Any) -> Any:
        """Run one zarrfs measurement; errors are recorded, and after 3 failed mounts in a
        row the remaining zarrfs measurements are skipped."""
        if not self.zarrfs_ok:
            return None
        try:
            out = fn(*a)
            self.mount_failures = 0
            return out
        except MountError as e:
            self.res.err(what, e)
            self.mount_failures += 1
            if self.mount_failures >= 3:
                log("zarrfs does not mount; skipping the remaining zarrfs measurements")
                self.zarrfs_ok = False
        except Exception as e:
            self.res.err(what, e)
        return None

    # -- building ---------------------------------------------------------------------------

    def build(self) -> None:
        import tensorstore as ts

        a = self.args
        dtypes = ["uint16", "float32"]
        for dtype in dtypes:
            itemsize = np.dtype(dtype).itemsize
            shape = shape_for(a.size, itemsize)
            t0 = time.perf_counter()
            data = gen_array(dtype, shape, seed=1)
            raw = self.shm / f"{dtype}.raw"
            data.tofile(raw)
            raw2 = self.shm / f"{dtype}-2.raw"
            gen_array(dtype, shape, seed=2).tofile(raw2)
            log(f"generated {dtype} {shape} in {time.perf_counter() - t0:.1f} s")
            for codec in a.codecs:
                for sharded in (False, True):
                    if a.layouts != "both" and a.layouts != ("sharded" if sharded else "plain"):
                        continue
                    chunks = (INNER, INNER)
                    shards = None
                    if sharded:
                        up = [(-(-d // INNER)) * INNER for d in shape]
                        shards = (min(8 * INNER, up[0]), min(8 * INNER, up[1]))
                    cfg = Config(
                        dtype,
                        codec,
                        sharded,
                        shape,
                        chunks,
                        shards,
                        self.work / f"{dtype}-{codec}-{'sharded' if sharded else 'plain'}",
                        raw,
                        raw2,
                    )
                    t0 = time.perf_counter()
                    spec = ts_create_spec(cfg.path, dtype, shape, chunks, shards, codec)
                    arr = ts.open(spec, create=True, context=ts_context()).result()
                    arr.write(data).result()
                    cfg.nbytes = data.nbytes
                    cfg.stored = dir_bytes(cfg.path)
                    log(
                        f"built {cfg.name}: {fmt_size(cfg.nbytes)} -> {fmt_size(cfg.stored)} "
                        f"in {time.perf_counter() - t0:.1f} s"
                    )
                    self.configs.append(cfg)
            del data

    def build_big(self) -> Config:
        """The --big array (uint16, zstd-1), sharded with shards of --shard-size (<= half
        the array): for the memory and the sharding measurements. Written shard row by shard
        row so the generator never holds more than one row of shards."""
        import tensorstore as ts

        a = self.args
        shape = shape_for(a.big, 2)
        rows, cols = shape
        # 1 MiB inner chunks whose rows are 4 KiB, so one page of `data` lies in one chunk.
        chunks = (256, 2048)
        shard_rows = max(chunks[0], min(rows, a.shard_size // (cols * 2)) // chunks[0] * chunks[0])
        shards = (shard_rows, (-(-cols // chunks[1])) * chunks[1])
        path = self.work / "big-uint16-zstd-sharded"
        cfg = Config("uint16", "zstd", True, shape, chunks, shards, path, Path(), Path())
        t0 = time.perf_counter()
        arr = ts.open(
            ts_create_spec(path, "uint16", shape, cfg.chunks, shards, "zstd"),
            create=True,
            context=ts_context(),
        ).result()
        slab = np.empty((shard_rows, cols), dtype="<u2")
        base = big_base(cols)
        for r in range(0, rows, shard_rows):
            n = min(shard_rows, rows - r)
            for q in range(0, n, BIG_PIECE):
                m = min(BIG_PIECE, n - q)
                np.add(base[:m], (r + q) // BIG_PIECE, out=slab[q : q + m])
            arr[r : r + n].write(slab[:n]).result()
        del slab
        cfg.nbytes = rows * cols * 2
        cfg.stored = dir_bytes(path)
        log(
            f"built big {shape} shards {shards}: {fmt_size(cfg.nbytes)} -> "
            f"{fmt_size(cfg.stored)} in {time.perf_counter() - t0:.1f} s"
        )
        return cfg

    # -- 1. baselines -------------------------------------------------------------------------

    def baseline_reads(self, cfg: Config) -> None:
        import zarr

        warm_files(cfg.path)
        t0 = time.perf_counter()
        arr = ts_open(cfg.path)
        out = arr.read().result()
        self.res.add(cfg.name, "ts_read", time.perf_counter() - t0)
        assert out.nbytes == cfg.nbytes
        del out, arr
        warm_files(cfg.path)
        t0 = time.perf_counter()
        out = zarr.open_array(str(cfg.path), mode="r")[...]
        self.res.add(cfg.name, "zarr_read", time.perf_counter() - t0)
        assert out.nbytes == cfg.nbytes
        del out
        for _ in range(WARM_RUNS):  # ~50 ms each at 256 MiB: take several
            self.res.add(cfg.name, "tmpfs_dd", dd(cfg.raw, "/dev/null", expect=cfg.nbytes))
        r = worker("pread", str(cfg.raw), str(cfg.raw), str(self.args.random_reads), "0")
        self.res.add(cfg.name, "tmpfs_rand", r["n"] / r["seconds"])

    def baseline_write(self, cfg: Config, data2: np.ndarray) -> None:
        dst = self.work / "ts-write-copy"
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(cfg.path, dst)
        warm_files(dst)
        t0 = time.perf_counter()
        arr = ts_open(dst, write=True)
        arr.write(data2).result()
        self.res.add(cfg.name, "ts_write", time.perf_counter() - t0)
        shutil.rmtree(dst, ignore_errors=True)

    # -- 2. zarrfs reads ----------------------------------------------------------------------

    def zarrfs_reads(self, cfg: Config, rep: int) -> None:
        warm_files(cfg.path)
        with self.mount(cfg.path) as m:
            data = m.mp / "data"
            size = int(run_checked(["stat", "-c", "%s", str(data)], timeout=30).stdout)
            if size != cfg.nbytes:
                raise RuntimeError(f"{data} is {size} bytes, expected {cfg.nbytes}")
            self.res.add(cfg.name, "zfs_cold", dd(data, "/dev/null", expect=cfg.nbytes))
            for _ in range(WARM_RUNS):
                self.res.add(cfg.name, "zfs_warm", dd(data, "/dev/null", expect=cfg.nbytes))
            r = worker("pread", str(data), str(cfg.raw), str(self.args.random_reads), str(rep))
            self.res.add(cfg.name, "zfs_rand", r["n"] / r["seconds"])
        self.res.add(cfg.name, "zfs_rss", m.peak_rss)
        if r["mismatches"]:
            raise RuntimeError(f"{r['mismatches']} of {r['n']} random 4 KiB reads differ from the array")
        # What close-to-open costs: the same cold read with the store trusted until unmount.
        never = ",".join(x for x in (self.args.mount_opts, "recheck=never") if x)
        with self.mount(cfg.path, never) as m:
            self.res.add(cfg.name, "zfs_cold_never", dd(m.mp / "data", "/dev/null", expect=cfg.nbytes))

    def zarrfs_memmap(self, cfg: Config, expected_sum: float) -> None:
        warm_files(cfg.path)
        with self.mount(cfg.path) as m:
            r = worker("memmap_sum", str(m.mp / "data"), cfg.dtype)
            self.res.add(cfg.name, "zfs_memmap", r["seconds"])
        self.res.add(cfg.name, "zfs_rss", m.peak_rss)
        if not np.isclose(r["sum"], expected_sum, rtol=1e-6, atol=0):
            raise RuntimeError(f"memmap sum {r['sum']} != {expected_sum}")

    # -- 3. zarrfs writes ---------------------------------------------------------------------

    def zarrfs_write(self, cfg: Config, data2: np.ndarray, verify: bool) -> None:
        dst = self.work / "zarrfs-write-copy"
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(cfg.path, dst)
        warm_files(dst)
        try:
            with self.mount(dst) as m:
                t = dd(cfg.raw2, m.mp / "data", "conv=notrunc,fsync", expect=cfg.nbytes)
                self.res.add(cfg.name, "zfs_write", t)
            self.res.add(cfg.name, "zfs_write_rss", m.peak_rss)
            self.res.add(cfg.name, "zfs_write_close", t + (m.unmount_seconds or 0))
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

    # -- 4. memory ----------------------------------------------------------------------------

    def memory(self, big: Config) -> None:
        warm_files(big.path)
        opts = ",".join(x for x in (self.args.mount_opts, f"cache={self.args.cache}") if x)
        peak_rss = 0
        stop = threading.Event()
        with self.mount(big.path, opts=opts) as m:
            pid = m.pid
            assert pid is not None

            def sample() -> None:
                nonlocal peak_rss
                while not stop.is_set():
                    peak_rss = max(peak_rss, proc_status(pid, "VmRSS") or 0)
                    time.sleep(0.05)

            th = threading.Thread(target=sample, daemon=True)
            th.start()
            try:
                t = dd(m.mp / "data", "/dev/null", expect=big.nbytes, timeout=1800)
            finally:
                stop.set()
                th.join()
            hwm = proc_status(pid, "VmHWM")
        cache = parse_size(self.args.cache)
        self.res.memory = {
            "bytes": big.nbytes,
            "stored": big.stored,
            "seconds": t,
            "hwm": hwm,
            "rss_sampled": peak_rss,
            "cache": cache,
            "opts": opts,
            "limit": cache + T_RSS_SLACK,
        }

    # -- 5. sharding --------------------------------------------------------------------------

    def shard_cost(self, big: Config) -> None:
        """Store bytes the daemon reads (its rchar) to serve a 4 KiB page that lies inside one
        inner chunk of the first shard, on a fresh mount (index + that chunk expected), then a
        page of the next inner chunk of the same shard (the index is cached by then: that
        chunk alone). POSIX_FADV_RANDOM keeps the kernel from reading ahead."""
        _, cols = big.shape
        assert big.shards is not None
        ch = big.chunks
        cps = (big.shards[0] // ch[0], big.shards[1] // ch[1])  # inner chunks per shard
        shard_file = big.path / "c" / "0" / "0"
        shard_stored = shard_file.stat().st_size
        index_nbytes = cps[0] * cps[1] * 16 + 4
        with open(shard_file, "rb") as f:
            f.seek(shard_stored - index_nbytes)
            idx = np.frombuffer(f.read(index_nbytes)[:-4], dtype="<u8").reshape(*cps, 2)
        first = (cps[0] // 2, cps[1] // 2)  # an inner chunk in the middle of the first shard
        second = (first[0], (first[1] + 1) % cps[1])
        assert ch[1] * 2 % 4096 == 0 and cols * 2 % 4096 == 0
        base: dict[str, Any] = {
            "shard_bytes": big.shards[0] * big.shards[1] * 2,
            "shard_stored": shard_stored,
            "chunk_bytes": ch[0] * ch[1] * 2,
            "index_nbytes": index_nbytes,
            "chunk": f"{ch[0]}x{ch[1]}",
            "rows": [],
        }
        warm_files(big.path)
        with self.mount(big.path) as m:
            assert m.pid is not None
            for n, ci in enumerate((first, second)):
                r, c0 = ci[0] * ch[0] + 7, ci[1] * ch[1]  # row 7 of the chunk, first 4 KiB
                off = (r * cols + c0) * 2
                before = proc_io(m.pid)
                got = worker("read_page", str(m.mp / "data"), str(off), "4096", "1", timeout=60)
                after = proc_io(m.pid)
                want = big_base(cols)[r % BIG_PIECE] + r // BIG_PIECE
                if bytes.fromhex(got["hex"]) != want[c0 : c0 + 2048].tobytes():
                    raise RuntimeError(f"the page of inner chunk {ci} read through the mount is wrong")
                chunk_stored = int(idx[ci][1])
                base["rows"].append(
                    {
                        "how": "first page, fresh mount" if n == 0 else "next inner chunk, same shard",
                        "chunk_stored": chunk_stored,
                        "expected": chunk_stored + (index_nbytes if n == 0 else 0),
                        "what": "index + chunk" if n == 0 else "chunk",
                        "rchar": after["rchar"] - before["rchar"],
                        "syscr": after["syscr"] - before["syscr"],
                    }
                )
        self.res.shard = base

    # -- 6. groups ---------------------------------------------------------------------------

    def build_group(self, zarr_format: int) -> Path:
        """The group of --group-arrays small arrays, cached in --data-dir (built once)."""
        n = self.args.group_arrays
        path = Path(self.args.data_dir) / f"group-v{zarr_format}-{n}-layout{GROUP_LAYOUT}"
        if path.is_dir():
            return path
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=path.name + ".tmp-", dir=path.parent))
        t0 = time.perf_counter()
        try:
            write_group(tmp, n, zarr_format)
            import zarr  # the oracle: zarr-python sees the arrays through the consolidated metadata

            g = zarr.open_group(str(tmp), mode="r", zarr_format=zarr_format, use_consolidated=True)
            last = g[f"a{n - 1:05d}"]
            if last.attrs["index"] != n - 1 or last[3] != n + 2:
                raise RuntimeError(f"zarr-python reads the generated group {tmp} differently")
            tmp.rename(path)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        log(f"built group v{zarr_format} of {n} arrays in {time.perf_counter() - t0:.1f} s: {path}")
        return path

    def group_mount_ls(self, key: str, store: Path, zarr_format: int) -> None:
        """One fresh mount: seconds for `zarrfs mount` (without -f) to return, i.e. until the
        daemon serves, then for `ls` of the root, then `ls -l` (each entry also costs the
        getxattr round trips `ls -l` makes); unmounted (daemon exited) afterwards."""
        self.nmount += 1
        mp = self.mnt / f"m{self.nmount}"
        mp.mkdir()
        opts = ",".join(x for x in (self.args.mount_opts, f"log={self.logfile}") if x)
        pid = None
        try:
            t0 = time.perf_counter()
            r = subprocess.run(
                [self.args.zarrfs, "mount", str(store), str(mp), "-o", opts],
                capture_output=True,
                text=True,
                timeout=300,
            )
            t_mount = time.perf_counter() - t0
            if r.returncode != 0 or not mounted(mp):
                raise MountError(f"zarrfs mount exited with {r.returncode}: {r.stderr.strip()[-800:]}")
            pid = daemon_pid(mp)
            t0 = time.perf_counter()
            listed = run_checked(["ls", str(mp)], timeout=300).stdout.split()
            t_ls = time.perf_counter() - t0
            t0 = time.perf_counter()
            out = run_checked(["ls", "-l", str(mp)], timeout=300).stdout
            t_ls_l = time.perf_counter() - t0
            names = [ln.split()[-1] for ln in out.splitlines() if not ln.startswith("total")]
            # `ls -l` hides the dot files: v2's .zgroup/.zmetadata; v3 shows zarr.json.
            expected = self.args.group_arrays + (1 if zarr_format == 3 else 0)
            if len(names) != expected or len(listed) != expected:
                raise RuntimeError(f"ls (-l) of the group lists {len(listed)} ({len(names)}) entries, "
                                   f"expected {expected}")
            rss = proc_status(pid, "VmHWM") if pid else None
        finally:
            unmount_daemon(mp, pid or daemon_pid(mp))
        self.res.groups[key]["mount"].append(t_mount)
        self.res.groups[key]["ls"].append(t_ls)
        self.res.groups[key]["ls_l"].append(t_ls_l)
        if rss:
            self.res.groups[key]["rss"].append(rss)

    def groups(self) -> None:
        for zarr_format in (2, 3):
            key = f"v{zarr_format}"
            try:
                store = self.build_group(zarr_format)
            except Exception as e:
                self.res.err(f"group {key}: building", e)
                continue
            self.res.groups[key] = {"mount": [], "ls": [], "ls_l": [], "rss": [], "stored": dir_bytes(store)}
            warm_files(store)
            for _ in range(GROUP_RUNS):
                self.zarrfs_try(f"group {key} mount + ls", self.group_mount_ls, key, store, zarr_format)

    # -- profile ------------------------------------------------------------------------------

    def profile(self, cfg: Config) -> None:
        out_dir = Path(self.args.profile_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        out = out_dir / f"profile-cold-{cfg.slug}.txt"
        warm_files(cfg.path)
        with self.mount(cfg.path) as m:
            m.start_profile(out, self.args.profile_native)
            t = dd(m.mp / "data", "/dev/null", expect=cfg.nbytes)
            m.stop_profile()
        self.res.profile = {
            "config": cfg.name,
            "file": str(out),
            "seconds": t,
            "bytes": cfg.nbytes,
            **summarize_profile(out),
        }

    # -- run ----------------------------------------------------------------------------------

    def run(self) -> None:
        a = self.args
        t_start = time.perf_counter()
        if a.only_group:
            log("groups: mount and ls of a group of small arrays")
            self.groups()
            self.elapsed = time.perf_counter() - t_start
            return
        self.build()
        sums: dict[str, float] = {}
        data2: dict[str, np.ndarray] = {}
        for cfg in self.configs:
            if cfg.dtype not in sums:
                sums[cfg.dtype] = float(np.fromfile(cfg.raw, dtype=cfg.dtype).sum())
                data2[cfg.dtype] = np.fromfile(cfg.raw2, dtype=cfg.dtype).reshape(cfg.shape)
        for cfg in self.configs:
            log(f"reads: {cfg.name}")
            for rep in range(a.repeat):
                self.baseline_reads(cfg)
                self.zarrfs_try(f"{cfg.name} zarrfs dd/pread", self.zarrfs_reads, cfg, rep)
                self.zarrfs_try(f"{cfg.name} zarrfs memmap", self.zarrfs_memmap, cfg, sums[cfg.dtype])
        if not a.skip_writes:
            for cfg in self.configs:
                log(f"writes: {cfg.name}")
                for rep in range(a.write_repeat):
                    self.baseline_write(cfg, data2[cfg.dtype])
                    self.zarrfs_try(
                        f"{cfg.name} zarrfs write",
                        self.zarrfs_write,
                        cfg,
                        data2[cfg.dtype],
                        rep == 0,
                    )
        data2.clear()
        if a.profile and self.configs:
            pc = next((c for c in self.configs if c.name == a.profile_config), self.configs[0])
            log(f"profile: cold read of {pc.name} under py-spy")
            self.zarrfs_try("profile", self.profile, pc)
        if not a.skip_big and self.zarrfs_ok:
            big = self.build_big()
            log("memory: streaming the big array")
            self.zarrfs_try("memory", self.memory, big)
            log("sharding: one inner chunk")
            self.zarrfs_try("shard cost", self.shard_cost, big)
            shutil.rmtree(big.path, ignore_errors=True)
        if not a.skip_group and self.zarrfs_ok:
            log("groups: mount and ls of a group of small arrays")
            self.groups()
        self.elapsed = time.perf_counter() - t_start

    def cleanup(self) -> None:
        for m in list(Mount.active):
            with contextlib.suppress(Exception):
                m.close()
        if self.args.keep:
            log(f"kept {self.work} and {self.shm}")
            return
        shutil.rmtree(self.shm, ignore_errors=True)
        shutil.rmtree(self.work, ignore_errors=True)

    # -- report -------------------------------------------------------------------------------

    def report(self) -> str:
        a, res = self.args, self.res
        L: list[str] = []
        from importlib.metadata import version

        cpu = "?"
        with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "?")
        L.append("# zarrfs benchmark")
        L.append("")
        L.append(
            f"{time.strftime('%Y-%m-%d %H:%M')}, {platform.node()}: {os.cpu_count()} x {cpu}, "
            f"Linux {platform.release()}; Python {platform.python_version()}, "
            f"tensorstore {version('tensorstore')}, zarr {version('zarr')}, "
            f"numpy {np.__version__}"
        )
        L.append(
            (
                f"Groups only (--only-group), on {fs_type(Path(a.data_dir))} ({a.data_dir}). "
                if a.only_group
                else f"Arrays of {fmt_size(a.size)} on {fs_type(self.work)} ({self.work.parent}); "
                f"raw copies on tmpfs. Medians of {a.repeat} runs "
                f"({a.write_repeat} for writes; warm and tmpfs dd {WARM_RUNS} per run). "
                "MB/s = 10^6 B/s of uncompressed data. "
            )
            + f"Mount options: {a.mount_opts or '(defaults)'}. "
            f"Run took {getattr(self, 'elapsed', 0):.0f} s."
        )
        L.append("")
        if not a.only_group:
            L.append("## Arrays")
            L.append("")
            L.append("| array | shape | chunks | shards | size | stored | ratio |")
            L.append("|---|---|---|---|---|---|---|")
            for c in self.configs:
                L.append(
                    f"| {c.name} | {c.shape[0]}x{c.shape[1]} | {c.chunks[0]}x{c.chunks[1]} "
                    f"({fmt_size(c.chunks[0] * c.chunks[1] * np.dtype(c.dtype).itemsize)}) | "
                    f"{f'{c.shards[0]}x{c.shards[1]}' if c.shards else '-'} | {fmt_size(c.nbytes)} | "
                    f"{fmt_size(c.stored)} | {c.nbytes / max(1, c.stored):.2f}x |"
                )
            L.append("")

        def mbps(cfg: Config, key: str) -> float | None:
            t = median(res.rows.get(cfg.name, {}).get(key, []))
            return cfg.nbytes / t / MB if t else None

        def cell(
            v: float | None, ref: float | None = None, target: float | None = None, unit: str = ""
        ) -> str:
            if v is None:
                return "n/a"
            s = f"{v:,.0f}{unit}"
            if ref:
                r = v / ref
                s += f" ({r:.2f}x"
                if target is not None:
                    s += ", ok" if r >= target else ", MISS"
                s += ")"
            elif target is not None and not ref:
                s += " (ok)" if v >= target else " (MISS)"
            return s

        def cell_abs(v: float | None, ref: float | None, target: float) -> str:
            """A ratio for information, judged against an absolute target."""
            if v is None:
                return "n/a"
            r = f"{v / ref:.2f}x, " if ref else ""
            return f"{v:,.0f} ({r}{'ok' if v >= target else 'MISS'})"

        def peak(cfg: Config, key: str) -> str:
            xs = res.rows.get(cfg.name, {}).get(key, [])
            return fmt_size(max(xs)) if xs else "n/a"

        if not a.only_group:
            L.append("## Reads (MB/s; zarrfs ratio to TensorStore, warm to tmpfs dd)")
            L.append("")
            L.append(
                f"Targets: cold dd >= {T_COLD:.1f}x TensorStore; warm dd >= {T_WARM:.1f}x tmpfs; "
                f"random 4 KiB >= {T_RAND:,}/s (after one full pass; ratio to the same preads "
                "of the raw file on tmpfs). memmap sum: no target, ratio to TensorStore."
            )
            L.append("")
            L.append(
                "| array | TensorStore | zarr-python | tmpfs dd | zarrfs cold dd | "
                "zarrfs warm dd | zarrfs memmap sum | zarrfs random 4 KiB/s | daemon peak RSS |"
            )
            L.append("|---|---|---|---|---|---|---|---|---|")
            for c in self.configs:
                ts_ = mbps(c, "ts_read")
                tmp = mbps(c, "tmpfs_dd")
                rand = median(res.rows.get(c.name, {}).get("zfs_rand", []))
                trand = median(res.rows.get(c.name, {}).get("tmpfs_rand", []))
                L.append(
                    f"| {c.name} | {cell(ts_)} | {cell(mbps(c, 'zarr_read'), ts_)} | "
                    f"{cell(tmp)} | {cell(mbps(c, 'zfs_cold'), ts_, T_COLD)} | "
                    f"{cell(mbps(c, 'zfs_warm'), tmp, T_WARM)} | "
                    f"{cell(mbps(c, 'zfs_memmap'), ts_)} | {cell_abs(rand, trand, T_RAND)} | "
                    f"{peak(c, 'zfs_rss')} |"
                )
            L.append("")
        if not a.only_group:
            L.append("## Close-to-open: what `recheck=open` (the default) costs a cold read")
            L.append("")
            L.append(f"Target: cold dd with recheck=open >= {T_RECHECK:.2f}x the same with recheck=never.")
            L.append("")
            L.append("| array | zarrfs cold dd, recheck=never | zarrfs cold dd, recheck=open |")
            L.append("|---|---|---|")
            for c in self.configs:
                never = mbps(c, "zfs_cold_never")
                L.append(f"| {c.name} | {cell(never)} | {cell(mbps(c, 'zfs_cold'), never, T_RECHECK)} |")
            L.append("")
        if not a.skip_writes:
            L.append("## Writes (MB/s; whole array into a fresh copy of the array)")
            L.append("")
            L.append(
                f"Target: zarrfs `dd conv=notrunc,fsync` >= {T_WRITE:.1f}x TensorStore "
                "(TensorStore's file driver fsyncs too). The last column adds the "
                "unmount until the daemon has exited."
            )
            L.append("")
            L.append(
                "| array | TensorStore write | zarrfs dd write+fsync | "
                "zarrfs incl. unmount | daemon peak RSS |"
            )
            L.append("|---|---|---|---|---|")
            for c in self.configs:
                tw = mbps(c, "ts_write")
                L.append(
                    f"| {c.name} | {cell(tw)} | {cell(mbps(c, 'zfs_write'), tw, T_WRITE)} | "
                    f"{cell(mbps(c, 'zfs_write_close'), tw)} | {peak(c, 'zfs_write_rss')} |"
                )
            L.append("")
        mem = res.memory
        if mem:
            L.append(f"## Memory (streaming {fmt_size(mem['bytes'])} with `-o {mem['opts']}`)")
            L.append("")
            L.append("| array | stored | dd MB/s | daemon VmHWM | target | |")
            L.append("|---|---|---|---|---|---|")
            ok = mem["hwm"] is not None and mem["hwm"] <= mem["limit"]
            L.append(
                f"| uint16/zstd/sharded {fmt_size(mem['bytes'])} | {fmt_size(mem['stored'])} | "
                f"{mem['bytes'] / mem['seconds'] / MB:,.0f} | "
                f"{fmt_size(mem['hwm'] or 0)} (sampled VmRSS {fmt_size(mem['rss_sampled'])}) | "
                f"<= {fmt_size(mem['limit'])} | {'ok' if ok else 'MISS'} |"
            )
            L.append("")
        sh = res.shard
        if sh:
            L.append("## Sharding: store bytes to read one inner chunk")
            L.append("")
            L.append(
                f"A 4 KiB page of `data` inside one {sh['chunk']} inner chunk "
                f"({fmt_size(sh['chunk_bytes'])} raw) of the first shard "
                f"({fmt_size(sh['shard_bytes'])} raw, {fmt_size(sh['shard_stored'])} stored, "
                f"index {fmt_size(sh['index_nbytes'])}), read with POSIX_FADV_RANDOM. Bytes = "
                "the daemon's `rchar` (/proc/<pid>/io) across the read, which also counts the "
                "few hundred bytes of FUSE requests read from /dev/fuse. Target: index + that "
                "chunk on a fresh mount; then that chunk alone."
            )
            L.append("")
            L.append(
                "| read | target | target bytes | store bytes read | x target | "
                "x shard stored | read syscalls | |"
            )
            L.append("|---|---|---|---|---|---|---|---|")
            for row in sh["rows"]:
                ok = row["rchar"] <= row["expected"] + 16 * 1024
                L.append(
                    f"| {row['how']} | {row['what']} | {fmt_size(row['expected'])} | "
                    f"{fmt_size(row['rchar'])} | {row['rchar'] / row['expected']:.2f}x | "
                    f"{row['rchar'] / sh['shard_stored']:.4f}x | {row['syscr']} | "
                    f"{'ok' if ok else 'MISS'} |"
                )
            L.append("")
        if res.groups:
            L.append(f"## Groups: mount and `ls` of {a.group_arrays:,} small arrays")
            L.append("")
            L.append(
                f"A group of {a.group_arrays:,} arrays of 16 float32 (one chunk each) with "
                "consolidated metadata (v2 `.zmetadata`, v3 inline in the root zarr.json), store "
                "files in the page cache. Each run is a fresh mount: `zarrfs mount` without `-f` "
                "until it returns (the daemon serves), then `ls` of the root, then `ls -l` (no target: "
                "it adds two getxattr round trips per entry, for SELinux and ACLs). Medians of "
                f"{GROUP_RUNS} runs. Targets: mount < {T_GROUP_MOUNT:g} s, ls < {T_GROUP_LS:g} s."
            )
            L.append("")
            L.append("| group | stored | zarrfs mount | ls root | ls -l root | daemon peak RSS | |")
            L.append("|---|---|---|---|---|---|---|")
            for key, g in res.groups.items():
                tm, tl, tll = median(g["mount"]), median(g["ls"]), median(g["ls_l"])
                ok = "MISS" if tm is None or tl is None or tm >= T_GROUP_MOUNT or tl >= T_GROUP_LS else "ok"
                ok = "n/a" if tm is None and tl is None else ok
                L.append(
                    f"| {key}, {a.group_arrays:,} arrays | {fmt_size(g['stored'])} | "
                    f"{'n/a' if tm is None else f'{tm:.3f} s'} | {'n/a' if tl is None else f'{tl:.3f} s'} | "
                    f"{'n/a' if tll is None else f'{tll:.3f} s'} | "
                    f"{fmt_size(max(g['rss'])) if g['rss'] else 'n/a'} | "
                    f"{ok} (mount < {T_GROUP_MOUNT:g} s, ls < {T_GROUP_LS:g} s) |"
                )
            L.append("")
        pr = res.profile
        if pr:
            L.append(
                f"## Profile: cold dd of {pr['config']} under py-spy "
                f"({pr['bytes'] / pr['seconds'] / MB:,.0f} MB/s while sampled)"
            )
            L.append("")
            L.append(
                f"{pr['samples']} busy samples over all threads at 200 Hz ({pr['idle']} more "
                f"of threads waiting for work left out); raw stacks in `{pr['file']}`."
            )
            L.append("")
            for title, key in (
                ("Top functions by own samples", "top"),
                ("zarrfs functions by inclusive samples", "top_incl"),
            ):
                L.append(f"{title}:")
                L.append("")
                L.append("| self % | inclusive % | function |")
                L.append("|---|---|---|")
                for fn, s, inc in pr.get(key, []):
                    L.append(
                        f"| {100 * s / max(1, pr['samples']):.1f} | "
                        f"{100 * inc / max(1, pr['samples']):.1f} | `{fn}` |"
                    )
                L.append("")
        if res.errors or not self.zarrfs_ok:
            L.append("## Errors")
            L.append("")
            if a.skip_zarrfs:
                L.append("- zarrfs measurements skipped (--skip-zarrfs)")
            for e in dict.fromkeys(res.errors):
                L.append(f"- {e}")
            L.append("")
        return "\n".join(L)


# Leaf frames of threads that wait for work (py-spy counts some of these waits as active).
IDLE_LEAVES = (
    "WorkerThread._work (trio/_core/_thread_cache.py",
    "_worker (concurrent/futures/thread.py",
    "EpollIOManager.get_events (",
    "Condition.wait (threading.py",
    "Event.wait (threading.py",
    "_wait_for_tstate_lock (threading.py",
)


def summarize_profile(path: Path, top: int = 25) -> dict[str, Any]:
    """Self and inclusive samples per function from py-spy's collapsed-stack output."""
    selfc: Counter[str] = Counter()
    incl: Counter[str] = Counter()
    total = 0
    if not path.exists():
        return {"samples": 0, "top": []}
    idle = 0
    for line in path.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        k = int(n)
        frames = [re.sub(r" \(/.*/(site-packages|lib/python3\.\d+|src)/", " (", f) for f in stack.split(";")]
        if any(frames[-1].startswith(w) for w in IDLE_LEAVES):
            idle += k  # a thread waiting for work, which py-spy does not see as idle
            continue
        total += k
        selfc[frames[-1]] += k
        for f in set(frames):
            incl[f] += k
    names = [f for f, _ in selfc.most_common(top)]
    ours = [f for f, _ in incl.most_common() if "zarrfs/" in f][:15]
    return {
        "samples": total,
        "idle": idle,
        "top": [(f, selfc[f], incl[f]) for f in names],
        "top_incl": [(f, selfc[f], incl[f]) for f in ours],
    }


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--_worker":
        worker_main(sys.argv[2:])
        return
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=parse_size, default=None, help="bytes per array (default 256M)")
    p.add_argument("--repeat", type=int, default=None, help="runs per read figure (default 5)")
    p.add_argument(
        "--write-repeat",
        type=int,
        default=None,
        help="runs per write figure (default min(repeat, 2))",
    )
    p.add_argument(
        "--big",
        type=parse_size,
        default=None,
        help="array streamed for the memory figure (default 2G)",
    )
    p.add_argument(
        "--shard-size",
        type=parse_size,
        default=GiB,
        help="uncompressed shard of the big array for the sharding figure "
        "(default 1G; at most half of --big)",
    )
    p.add_argument("--cache", default="256M", help="cache= mount option for the memory figure")
    p.add_argument("--mount-opts", default="", help="-o options for every mount, e.g. readahead=1024")
    p.add_argument("--codecs", default="zstd,blosc", help="zstd,blosc")
    p.add_argument("--layouts", default="both", choices=["both", "plain", "sharded"])
    p.add_argument("--random-reads", type=int, default=2000)
    p.add_argument("--quick", action="store_true", help="32 MiB arrays, 2 repeats, 256 MiB big")
    p.add_argument("--out", help="also write the table (markdown) here")
    p.add_argument("--workdir", help="where to build the arrays (default $TMPDIR; not tmpfs)")
    p.add_argument("--zarrfs", default=str(VENV_BIN / "zarrfs"))
    p.add_argument("--skip-zarrfs", action="store_true", help="baselines only")
    p.add_argument("--skip-writes", action="store_true")
    p.add_argument("--skip-big", action="store_true", help="no memory and sharding figures")
    p.add_argument("--skip-group", action="store_true", help="no group mount/ls figures")
    p.add_argument(
        "--only-group",
        action="store_true",
        help="only the group figures: mount and ls of a group of --group-arrays small arrays",
    )
    p.add_argument("--group-arrays", type=int, default=10000, help="arrays in the group (default 10000)")
    p.add_argument(
        "--data-dir",
        help="where the groups are cached between runs (default zarrfs-bench-data beside the work dir)",
    )
    p.add_argument(
        "--profile", action="store_true", help="also run one cold read with the daemon under py-spy"
    )
    p.add_argument("--profile-config", default="uint16/zstd/plain")
    p.add_argument("--profile-native", action="store_true", help="py-spy --native")
    p.add_argument("--profile-dir", default=str(HERE / "profiles"))
    p.add_argument("--keep", action="store_true", help="keep the work directories")
    p.add_argument(
        "--rss-kill",
        type=parse_size,
        default=parse_size("4G"),
        help="kill a daemon whose RSS passes this (default 4G; 0: never)",
    )
    a = p.parse_args()
    a.size = a.size or (32 * MiB if a.quick else 256 * MiB)
    a.repeat = a.repeat or (2 if a.quick else 5)
    a.write_repeat = a.write_repeat or min(a.repeat, 2)
    a.big = a.big or (256 * MiB if a.quick else 2 * GiB)
    a.shard_size = min(a.shard_size, a.big // 2)
    a.codecs = [c.strip() for c in a.codecs.split(",") if c.strip()]
    if a.only_group:
        a.skip_writes = a.skip_big = True
    if not a.skip_zarrfs:
        r = subprocess.run([a.zarrfs, "--help"], capture_output=True, text=True)
        if r.returncode != 0:
            log(f"`zarrfs --help` fails ({r.stderr.strip().splitlines()[-1:]}); running the baselines only")
            a.skip_zarrfs = True
    b = Bench(a)
    prev = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        b.run()
    except BaseException as e:
        if not isinstance(e, KeyboardInterrupt):
            traceback.print_exc()
        b.res.err("benchmark aborted", e)
    finally:
        b.cleanup()
        signal.signal(signal.SIGTERM, prev)
    text = b.report()
    print(text)
    if a.out:
        Path(a.out).write_text(text + "\n")
        log(f"wrote {a.out}")


if __name__ == "__main__":
    main()
