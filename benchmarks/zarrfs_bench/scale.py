"""Cost against chunk count: the same accesses on twins that differ only in how many chunks
they hold (uint8, 16 x 16 chunks, zstd; 10^3 to 10^6 chunks, square), locally and on S3
behind a proxy that adds a latency to every request, with the store requests each access
makes (the daemon's request log, ZARRFS_REQUEST_LOG) and TensorStore reading the same
elements beside.

Accesses, each on a fresh mount unless it says otherwise:
- mount: `zarrfs mount` until the mount serves;
- stat data.tif;
- small read: open `data`, read 16 KiB in the middle (`pread`), close;
- again: the same on the same mount (the close-to-open check at the second open);
- buffered read, mmap read: the same 16 KiB by Python's buffered `read` (a whole
  `st_blksize` block) and through `mmap` (the kernel's window around the page), each on a
  fresh mount (scale_readers);
- gdal window: `gdal_translate -srcwin` of one 16 x 16 window of data.tif, in the middle;
- chunk file: read `chunks/c/I/J`, the middle chunk (one chunk, on every twin);
- ls row: `ls chunks/c/I/` of the middle row of chunks;
- getfattr: every `user.zarr.*` attribute of the array's directory;
- TensorStore: open the array and read the elements of the small read (cold, no cache).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from .arrays import ts_open
from .common import REPO, VENV_BIN, log, median
from .latency import proxy_child
from .mounting import Mount
from .s3 import BUCKET, environ, s3_server, s3_server_module
from .scale_readers import canvas_twins, measure_canvas, read_with, ts_requests, verdict

CHUNK = (16, 16)
SMALL_READ = 16 << 10
ACCESSES = ("mount", "stat data.tif", "small read", "again", "buffered read", "mmap read", "gdal window",
            "chunk file", "ls row", "getfattr")
READS = {"small read": "pread", "buffered read": "buffered", "mmap read": "mmap"}
# Accesses that touch more on a bigger twin (square twins: a row of the flat file crosses more
# chunks, a row of chunks/ holds more names): their growth is not judged against the target,
# which asks the same of accesses touching as many chunks.
GROWING = {"small read": "a row crosses more chunks", "again": "a row crosses more chunks",
           "buffered read": "a row crosses more chunks", "mmap read": "a row crosses more chunks",
           "ls row": "a row holds more chunks", "TensorStore": "a row crosses more chunks"}
TARGET_GROWTH = 3.0  # each access on the biggest twin within 3x of the smallest
TARGET_TS = 5.0  # a cold small read within 5x of TensorStore reading the same elements


def scale_arrays() -> ModuleType:
    """tests/helpers/scale_arrays.py (write_twin, RequestLog), by path: one way to make twins."""
    name = "zarrfs_bench_scale_arrays"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / "tests" / "helpers" / "scale_arrays.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@dataclass
class Twin:
    chunks: int  # asked for; the grid is the nearest square
    path: Path
    where: str = "local"  # or "S3 20 ms"
    source: str = ""  # what zarrfs mounts
    kvstore: dict[str, Any] = field(default_factory=dict)  # what TensorStore opens

    @property
    def side(self) -> int:
        return round(math.sqrt(self.chunks))

    @property
    def shape(self) -> tuple[int, int]:
        return self.side * CHUNK[0], self.side * CHUNK[1]

    @property
    def label(self) -> str:
        return f"{self.where}, {self.side * self.side:,} chunks"


@dataclass
class Figure:
    seconds: list[float] = field(default_factory=list)
    requests: list[int] = field(default_factory=list)

    def add(self, seconds: float, requests: int) -> None:
        self.seconds.append(seconds)
        self.requests.append(requests)


Figures = dict[str, dict[str, Figure]]  # twin label -> access -> figure


class Mounted:
    """A fresh mount of a twin, with its request log, for one access or a few."""

    def __init__(self, twin: Twin, work: Path, options: str) -> None:
        self.twin, self.work, self.options = twin, work, options
        self.log = scale_arrays().RequestLog(work / f"requests-{time.monotonic_ns()}.log")

    @contextlib.contextmanager
    def mount(self) -> Iterator[Mount]:
        mp = self.work / "mnt"
        with environ(self.log.env), Mount(str(VENV_BIN / "zarrfs"), self.twin.source, mp, self.options,
                                          logfile=self.work / "daemon.log") as m:
            yield m

    def timed(self, action: Callable[[], object]) -> tuple[float, int]:
        self.log.take(quiet=0.2)
        t0 = time.perf_counter()
        action()
        seconds = time.perf_counter() - t0
        return seconds, self.log.take(quiet=0.5).count()


def middle_offset(twin: Twin) -> int:
    return twin.shape[0] // 2 * twin.shape[1] + twin.shape[1] // 2


def small_read(path: Path, offset: int) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.pread(fd, SMALL_READ, offset)
    finally:
        os.close(fd)


def gdal_window(path: Path, twin: Twin, out: Path) -> None:
    y, x = twin.shape[0] // 2, twin.shape[1] // 2
    subprocess.run(["gdal_translate", "-q", "-srcwin", str(x), str(y), str(CHUNK[1]), str(CHUNK[0]),
                    str(path), str(out)], check=True, timeout=600, capture_output=True)


def getfattr(path: Path) -> None:
    for name in os.listxattr(path):
        os.getxattr(path, name)


def measure_twin(twin: Twin, work: Path, repeat: int, figures: Figures, options: str) -> None:
    found = figures.setdefault(twin.label, {a: Figure() for a in (*ACCESSES, "TensorStore")})
    offset = middle_offset(twin)
    ts_small_read(twin, offset)  # (TensorStore's first call pays for its start: not timed)
    for _ in range(repeat):
        mounted = Mounted(twin, work, options)
        t0 = time.perf_counter()
        with mounted.mount() as m:
            found["mount"].add(time.perf_counter() - t0, mounted.log.take(quiet=0.5).count())
            found["stat data.tif"].add(*mounted.timed(lambda: os.stat(m.mp / "data.tif")))
        with mounted.mount() as m:
            found["small read"].add(*mounted.timed(lambda: small_read(m.mp / "data", offset)))
            found["again"].add(*mounted.timed(lambda: small_read(m.mp / "data", offset)))
        for access in ("buffered read", "mmap read"):
            with mounted.mount() as m:
                found[access].add(*mounted.timed(functools.partial(read_with, READS[access], m.mp / "data",
                                                                   offset, SMALL_READ)))
        with mounted.mount() as m:
            found["gdal window"].add(*mounted.timed(lambda: gdal_window(m.mp / "data.tif", twin,
                                                                        work / "window.tif")))
        with mounted.mount() as m:
            row = m.mp / "chunks" / "c" / str(twin.side // 2)
            found["chunk file"].add(*mounted.timed((row / str(twin.side // 2)).read_bytes))
            found["ls row"].add(*mounted.timed(functools.partial(os.listdir, row)))
            found["getfattr"].add(*mounted.timed(lambda: getfattr(m.mp)))
        found["TensorStore"].add(ts_small_read(twin, offset), 0)


def ts_small_read(twin: Twin, offset: int) -> float:
    """TensorStore opening the array (no cache) and reading the rows of the small read."""
    first = offset // twin.shape[1]
    last = (offset + SMALL_READ - 1) // twin.shape[1]
    t0 = time.perf_counter()
    array = ts_open(twin.kvstore or twin.path)
    if first == last:
        start = offset % twin.shape[1]
        array[first, start : start + SMALL_READ].read().result()
    else:
        array[first : last + 1, :].read().result()
    return time.perf_counter() - t0


# -- the report ---------------------------------------------------------------------------------


def report(figures: Figures, wheres: dict[str, str], sizes: dict[str, tuple[int, int]]) -> str:
    """`wheres`: each twin's label -> where it is (local, S3 ...): growth is measured within one;
    `sizes`: its shape."""
    labels = list(figures)
    lines = ["## Cost against chunk count (benchmarks/scale.py)", "",
             "Medians; requests are store operations (objects, for batches and listings) "
             "counted by the daemon's request log. Growth: the biggest twin against the smallest "
             f"of one place (target <= {TARGET_GROWTH:g}x).", "",
             "| access | " + " | ".join(labels) + " | growth |",
             "|---|" + "---|" * (len(labels) + 1)]
    for access in (*ACCESSES, "TensorStore"):
        cells, growth = [], []
        for where in dict.fromkeys(wheres.values()):
            seconds = [median(figures[label][access].seconds) for label in labels if wheres[label] == where]
            growth.append(f"{where} {_growth(seconds, GROWING.get(access))}")
        for label in labels:
            figure = figures[label][access]
            s, n = median(figure.seconds), median([float(r) for r in figure.requests])
            cells.append("-" if s is None else f"{s:.3f} s" if access == "TensorStore"
                         else f"{s:.3f} s, {n:.0f} req")
        lines.append(f"| {access} | " + " | ".join(cells) + f" | {'; '.join(growth)} |")
    lines += ["", "Small reads against TensorStore reading the same elements (target <= "
              f"{TARGET_TS:g}x; on S3 <= 3x in at most 2x its requests, plus the metadata):", ""]
    for label in labels:
        ts = median(figures[label]["TensorStore"].seconds)
        shape = sizes[label]
        ts_reqs = ts_requests(shape, CHUNK, shape[0] // 2 * shape[1] + shape[1] // 2, SMALL_READ)
        for access, how in READS.items():
            figure = figures[label][access]
            target = 3.0 if label.startswith("S3") else TARGET_TS
            lines.append(f"- {label}, {how}: " + verdict(median(figure.seconds),
                                                         median([float(r) for r in figure.requests]),
                                                         ts, ts_reqs, target=target))
    return "\n".join(lines) + "\n"


def _growth(seconds: list[float | None], growing: str | None) -> str:
    known = [s for s in seconds if s is not None]
    if len(known) < 2 or not known[0]:
        return "-"
    ratio = known[-1] / known[0]
    if growing:
        return f"{ratio:.1f}x (not judged: {growing})"
    return f"{ratio:.1f}x ({'ok' if ratio <= TARGET_GROWTH else 'MISS'})"


# -- the run ------------------------------------------------------------------------------------


def local_twins(counts: list[int], data: Path) -> list[Twin]:
    twins = []
    for count in counts:
        twin = Twin(count, data / f"twin-{count}.zarr")
        if not (twin.path / "zarr.json").exists():
            t0 = time.perf_counter()
            shutil.rmtree(twin.path, ignore_errors=True)
            scale_arrays().write_twin(twin.path, (twin.side, twin.side), CHUNK)
            log(f"scale: wrote {twin.label} in {time.perf_counter() - t0:.0f} s")
        twin.source = str(twin.path)
        twins.append(twin)
    return twins


def s3_twin(local: Twin, endpoint: str, proxy_url: str, delay_ms: float) -> Twin:
    """The local twin uploaded to the moto server; mounted and read through the proxy."""
    import s3fs

    mod = s3_server_module()
    options = mod.S3Server(0, bucket=BUCKET).s3fs_options()
    options["client_kwargs"]["endpoint_url"] = endpoint
    options["config_kwargs"]["read_timeout"] = 60
    fs = s3fs.S3FileSystem(**options)
    prefix = local.path.name
    t0 = time.perf_counter()
    fs.put(str(local.path), f"{BUCKET}/{prefix}", recursive=True)
    log(f"scale: uploaded {local.label} in {time.perf_counter() - t0:.0f} s")
    kvstore = {"driver": "s3", "bucket": BUCKET, "path": prefix + "/", "endpoint": proxy_url,
               "aws_region": "us-east-1", "aws_credentials": {"type": "environment"}}
    return Twin(local.chunks, local.path, f"S3 {delay_ms:g} ms", f"s3://{BUCKET}/{prefix}", kvstore)


def run(args: Any) -> str:
    work = Path(tempfile.mkdtemp(prefix="zarrfs-scale-"))
    figures: Figures = {}
    wheres: dict[str, str] = {}
    sizes: dict[str, tuple[int, int]] = {}
    data = args.data_dir or work
    canvas = ""
    try:
        if not args.skip_canvas:
            def fresh(path: Path) -> Mounted:
                return Mounted(Twin(0, path, source=str(path)), work, args.mount_opts)

            canvas = measure_canvas(canvas_twins(data, scale_arrays()), fresh, args.repeat)
        twins = local_twins(args.chunks, data)
        for twin in twins:
            log(f"scale: measuring {twin.label}")
            wheres[twin.label], sizes[twin.label] = twin.where, twin.shape
            measure_twin(twin, work, args.repeat, figures, args.mount_opts)
        if args.s3_chunks:
            mod = s3_server_module()
            local = local_twins([args.s3_chunks], data)[0]
            with environ(mod.S3_ENV), open(work / "s3.log", "ab") as out, s3_server(out) as endpoint:
                port = int(endpoint.rsplit(":", 1)[1])
                with proxy_child(port, args.delay_ms / 2000, out) as proxy:
                    twin = s3_twin(local, endpoint, proxy.url, args.delay_ms)
                    log(f"scale: measuring {twin.label}")
                    wheres[twin.label], sizes[twin.label] = twin.where, twin.shape
                    options = ",".join(o for o in (f"endpoint_url={proxy.url}", args.mount_opts) if o)
                    measure_twin(twin, work, args.repeat, figures, options)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return report(figures, wheres, sizes) + ("\n" + canvas if canvas else "")
