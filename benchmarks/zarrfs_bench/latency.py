"""Remote reads under latency: the same arrays on S3 (the moto server of `s3.py`, in a child
process) reached through a TCP proxy that delays every piece of data by `delay` seconds in
each direction (tests/helpers/netproxy.py, in a child process of its own: a request costs a round
trip of 2 x delay on top of the server's time), plain and sharded. TensorStore (s3 kvstore,
no cache pool), zarr-python (fsspec/s3fs) and a cold `dd bs=1M` of `data` on a fresh zarrfs
mount each read the whole array; the proxy counts the requests each sends. With `azure`, a
zarrfs mount of the same arrays on Azurite (`azure.py`) through the same kind of proxy too."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import select
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import azure
from .arrays import Config, gen_array, shape_for, ts_context, ts_create_spec, ts_open
from .common import REPO, RUN_PY, dd, dir_bytes, fmt_size, log, median, run_checked
from .mounting import Mount, daemon_counters
from .s3 import BUCKET, environ, s3_server, s3_server_module, upload

MB = 1e6
AZURE = "zarrfs on Azure"  # (the same arrays on Azurite)
TOOLS = ("zarrfs", "TensorStore", "zarr-python", AZURE)


@dataclass
class Figures:
    """Per (delay, layout): seconds of each tool's reads and the requests each sent."""

    seconds: dict[tuple[float, str, str], list[float]] = field(default_factory=dict)
    requests: dict[tuple[float, str, str], list[int]] = field(default_factory=dict)
    # (delay, layout) -> zarrfs daemon's CPU seconds during the dd and its peak RSS, per run
    daemon: dict[tuple[float, str], list[tuple[float, int]]] = field(default_factory=dict)
    nbytes: int = 0
    errors: list[str] = field(default_factory=list)

    def add(self, delay: float, layout: str, tool: str, seconds: float, requests: int) -> None:
        self.seconds.setdefault((delay, layout, tool), []).append(seconds)
        self.requests.setdefault((delay, layout, tool), []).append(requests)

    def mbps(self, delay: float, layout: str, tool: str) -> float | None:
        t = median(self.seconds.get((delay, layout, tool), []))
        return self.nbytes / t / MB if t else None

    def daemon_usage(self, delay: float, layout: str) -> tuple[float, int] | None:
        """The medians of the zarrfs daemon's CPU seconds and peak RSS (bytes)."""
        runs = self.daemon.get((delay, layout))
        if not runs:
            return None
        return float(np.median([c for c, _ in runs])), int(np.median([r for _, r in runs]))

    def gets(self, delay: float, layout: str, tool: str) -> int | None:
        counts = self.requests.get((delay, layout, tool))
        return None if not counts else int(np.median(counts))


# -- the proxy, in a child process ------------------------------------------------------------


def serve_proxy(target_port: int, delay: float) -> None:
    """The child process: a delaying proxy to `target_port`; prints its port, then answers
    each line read from stdin with the number of requests passed so far, until stdin closes."""
    spec = importlib.util.spec_from_file_location(
        "zarrfs_bench_netproxy", REPO / "tests" / "helpers" / "netproxy.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    proxy = module.TcpProxy(target_port, delay=delay).start()
    print(json.dumps({"port": proxy.port}), flush=True)
    for _ in sys.stdin:
        print(proxy.requests, flush=True)
    proxy.stop()


class ProxyChild:
    def __init__(self, proc: subprocess.Popen[str], port: int) -> None:
        self.proc, self.port = proc, port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def requests(self) -> int:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("count\n")
        self.proc.stdin.flush()
        return int(self.proc.stdout.readline())


@contextlib.contextmanager
def proxy_child(target_port: int, delay: float, logfile: Any) -> Iterator[ProxyChild]:
    proc = subprocess.Popen([sys.executable, str(RUN_PY), "--_worker", "proxy", str(target_port), str(delay)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=logfile, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        if not select.select([proc.stdout], [], [], 30)[0]:
            raise RuntimeError("the proxy did not start in 30 s")
        yield ProxyChild(proc, int(json.loads(proc.stdout.readline())["port"]))
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# -- the arrays ---------------------------------------------------------------------------------


def build(size: int, work: Path, shm: Path) -> list[Config]:
    """uint16 zstd-1 arrays of `size`: plain 512x512 chunks (512 KiB), and sharded 2048x2048
    shards (8 MiB) of 256x256 inner chunks (128 KiB)."""
    import tensorstore as ts

    shape = shape_for(size, 2)
    data = gen_array("uint16", shape, seed=1)
    raw = shm / "latency-uint16.raw"
    data.tofile(raw)
    configs = []
    for layout, chunks, shards in (("plain", (512, 512), None), ("sharded", (256, 256), (2048, 2048))):
        if shards is not None:
            shards = (min(shards[0], shape[0]), min(shards[1], shape[1]))
        cfg = Config("uint16", "zstd", shards is not None, shape, chunks, shards, work / f"latency-{layout}",
                     raw, raw)
        spec = ts_create_spec(cfg.path, "uint16", shape, chunks, shards, "zstd")
        ts.open(spec, create=True, context=ts_context()).result().write(data).result()
        cfg.nbytes, cfg.stored = data.nbytes, dir_bytes(cfg.path)
        log(f"latency: built {cfg.name} {fmt_size(cfg.nbytes)} -> {fmt_size(cfg.stored)}")
        configs.append(cfg)
    return configs


# -- the measurements -------------------------------------------------------------------------


def counted(proxy: ProxyChild, read: Callable[[], Any]) -> tuple[float, int, Any]:
    before = proxy.requests()
    t0 = time.perf_counter()
    out = read()
    seconds = time.perf_counter() - t0
    return seconds, proxy.requests() - before, out


def measure(configs: list[Config], delays: list[float], repeat: int, zarrfs: str, mnt: Path,
            logfile: Path, cache: str = "256M", with_azure: bool = False) -> Figures:
    import zarr

    mod = s3_server_module()
    figures = Figures(nbytes=configs[0].nbytes)
    expected = np.fromfile(configs[0].raw, dtype="<u2").reshape(configs[0].shape)
    with environ(mod.S3_ENV), open(logfile, "ab") as log_out, s3_server(log_out) as endpoint:
        for cfg in configs:
            upload(cfg, endpoint, cfg.path.name)
        port = int(endpoint.rsplit(":", 1)[1])
        for delay in delays:
            with proxy_child(port, delay, log_out) as proxy:
                for cfg in configs:
                    layout = "sharded" if cfg.sharded else "plain"
                    log(f"latency: {layout} at {2000 * delay:.0f} ms round trip")
                    prefix = cfg.path.name
                    kvstore = {"driver": "s3", "bucket": BUCKET, "path": prefix + "/", "endpoint": proxy.url,
                               "aws_region": "us-east-1", "aws_credentials": {"type": "environment"}}
                    storage = {"endpoint_url": proxy.url, "key": mod.S3_ENV["AWS_ACCESS_KEY_ID"],
                               "secret": mod.S3_ENV["AWS_SECRET_ACCESS_KEY"]}
                    for rep in range(repeat):
                        def read_ts(k: dict[str, Any] = kvstore) -> Any:
                            return ts_open(k).read().result()

                        def read_zarr(s: dict[str, str] = storage, p: str = prefix) -> Any:
                            return zarr.open_array(f"s3://{BUCKET}/{p}", mode="r", storage_options=s)[...]

                        for tool, read in (("TensorStore", read_ts), ("zarr-python", read_zarr)):
                            seconds, sent, out = counted(proxy, read)
                            figures.add(delay, layout, tool, seconds, sent)
                            if rep == 0 and not np.array_equal(out, expected):
                                raise RuntimeError(f"{tool} reads other values")
                        del out
                        source, opts = f"s3://{BUCKET}/{prefix}", f"cache={cache},endpoint_url={proxy.url}"
                        try:
                            zarrfs_read(figures, proxy, cfg, delay, "zarrfs", zarrfs, source, opts,
                                        mnt / f"l{rep}", logfile, verify=rep == 0)
                        except Exception as e:  # recorded: the baselines still count
                            figures.errors.append(f"zarrfs {layout} at {delay}: {e}")
    if with_azure:
        measure_azure(figures, configs, delays, repeat, zarrfs, mnt, logfile, cache)
    return figures


def measure_azure(figures: Figures, configs: list[Config], delays: list[float], repeat: int, zarrfs: str,
                  mnt: Path, logfile: Path, cache: str) -> None:
    """zarrfs's reads of the same arrays on Azurite, through a proxy with the same delays."""
    with open(logfile, "ab") as log_out, azure.azurite() as server, environ(server.account_env):
        for cfg in configs:
            azure.upload(cfg, server, cfg.path.name)
        for delay in delays:
            with proxy_child(server.port, delay, log_out) as proxy:
                opts = f"cache={cache},endpoint_url={proxy.url}/{azure.azurite_module().ACCOUNT}"
                for cfg in configs:
                    source = f"az://{server.container}/{cfg.path.name}"
                    for rep in range(repeat):
                        try:
                            zarrfs_read(figures, proxy, cfg, delay, AZURE, zarrfs, source, opts,
                                        mnt / f"az{rep}", logfile, verify=rep == 0)
                        except Exception as e:  # recorded: the other figures still count
                            figures.errors.append(f"{AZURE} {cfg.path.name} at {delay}: {e}")


def zarrfs_read(figures: Figures, proxy: ProxyChild, cfg: Config, delay: float, tool: str, zarrfs: str,
                source: str, opts: str, mp: Path, logfile: Path, verify: bool) -> None:
    """A cold `dd` of `data` on a fresh mount of `source`: its seconds and requests under
    `tool`, and (S3) the daemon's CPU seconds and peak RSS."""
    layout = "sharded" if cfg.sharded else "plain"
    with Mount(zarrfs, source, mp, opts, logfile=logfile) as m:
        assert m.pid is not None
        cpu = daemon_counters(m.pid)[0]
        seconds, sent, _ = counted(proxy, lambda: dd(m.mp / "data", "/dev/null", expect=cfg.nbytes))
        cpu = daemon_counters(m.pid)[0] - cpu
        figures.add(delay, layout, tool, seconds, sent)
        if verify:
            run_checked(["cmp", str(m.mp / "data"), str(cfg.raw)])
    if tool == "zarrfs":
        figures.daemon.setdefault((delay, layout), []).append((cpu, m.peak_rss))
