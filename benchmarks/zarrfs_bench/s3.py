"""An array on S3 (a moto server on 127.0.0.1, the one the test suite uses, in a child
process): TensorStore's s3 kvstore, zarr-python over fsspec/s3fs, and a cold dd of data of
`zarrfs mount s3://... -o endpoint_url=...`, each reading the whole array from the server."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from types import ModuleType
from typing import Any
from unittest import mock

import numpy as np

from .arrays import Config, ts_open
from .common import REPO, RUN_PY, dd, dir_files, fmt_size, log, run_checked
from .context import Bench

BUCKET = "zarrfs-bench"
SERVER_PIDS: dict[str, int] = {}  # endpoint -> the process of the server serving it


def s3_server_module() -> ModuleType:
    """tests/helpers/s3_server.py (S3Server, S3_ENV, free_port, running), by path."""
    name = "zarrfs_bench_s3_server"
    if name in sys.modules:
        return sys.modules[name]
    path = REPO / "tests" / "helpers" / "s3_server.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def serve(port: int, bucket: str) -> None:
    """The child process: a moto server with an empty `bucket` until stdin closes."""
    mod = s3_server_module()
    server = mod.S3Server(port, bucket=bucket)
    with mod.running(server):
        print(json.dumps({"endpoint": server.endpoint_url}), flush=True)
        sys.stdin.read()


def environ(env: dict[str, str]) -> contextlib.AbstractContextManager[dict[str, str]]:
    """`env` in os.environ (for TensorStore, s3fs and the daemons we start) for a while."""
    return mock.patch.dict(os.environ, env)


@contextlib.contextmanager
def s3_server(logfile: Any) -> Iterator[str]:
    """A moto S3 server in a child process (so that serving does not share this process's
    GIL with the clients measured here), with an empty bucket; yields its endpoint URL."""
    mod = s3_server_module()
    port = mod.free_port()
    proc = subprocess.Popen(
        [sys.executable, str(RUN_PY), "--_worker", "s3_server", str(port), BUCKET],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=logfile,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        if not select.select([proc.stdout], [], [], 60)[0]:
            raise RuntimeError("the moto S3 server did not start in 60 s")
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the moto S3 server exited with {proc.wait()}")
        endpoint = str(json.loads(line)["endpoint"])
        SERVER_PIDS[endpoint] = proc.pid
        yield endpoint
    finally:
        proc.stdin.close()  # the server stops when its stdin closes
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def upload(cfg: Config, endpoint: str, prefix: str) -> None:
    """The array's files (as TensorStore wrote them) to s3://BUCKET/prefix/."""
    import s3fs

    mod = s3_server_module()
    options = mod.S3Server(0, bucket=BUCKET).s3fs_options()
    options["client_kwargs"]["endpoint_url"] = endpoint
    options["config_kwargs"]["read_timeout"] = 60
    fs = s3fs.S3FileSystem(**options)
    files = dir_files(cfg.path)
    t0 = time.perf_counter()
    fs.put([str(p) for p in files], [f"{BUCKET}/{prefix}/{p.relative_to(cfg.path)}" for p in files])
    dt = time.perf_counter() - t0
    log(f"uploaded {cfg.name} ({fmt_size(cfg.stored)}, {len(files)} objects) in {dt:.1f} s")


def s3_reads(b: Bench, cfg: Config) -> None:
    """Per repeat: TensorStore (s3 kvstore, no cache pool) and zarr-python reading the whole
    array from the server, then a cold dd of data on a fresh zarrfs mount of it."""
    import zarr

    mod = s3_server_module()
    prefix = cfg.slug
    expected = np.fromfile(cfg.raw, dtype=cfg.dtype).reshape(cfg.shape)
    with environ(mod.S3_ENV), open(b.logfile, "ab") as logfile, s3_server(logfile) as endpoint:
        upload(cfg, endpoint, prefix)
        kvstore = {
            "driver": "s3",
            "bucket": BUCKET,
            "path": prefix + "/",
            "endpoint": endpoint,
            "aws_region": "us-east-1",
            "aws_credentials": {"type": "environment"},
        }
        env = mod.S3_ENV
        storage = {"endpoint_url": endpoint, "key": env["AWS_ACCESS_KEY_ID"],
                   "secret": env["AWS_SECRET_ACCESS_KEY"]}
        for rep in range(b.args.repeat):
            t0 = time.perf_counter()
            out = ts_open(kvstore).read().result()
            b.res.add(cfg.name, "s3_ts", time.perf_counter() - t0)
            if rep == 0 and not np.array_equal(out, expected):
                raise RuntimeError("TensorStore reads other values from S3")
            del out
            t0 = time.perf_counter()
            out = zarr.open_array(f"s3://{BUCKET}/{prefix}", mode="r", storage_options=storage)[...]
            b.res.add(cfg.name, "s3_zarr", time.perf_counter() - t0)
            if rep == 0 and not np.array_equal(out, expected):
                raise RuntimeError("zarr-python reads other values from S3")
            del out
            b.zarrfs_try(f"{cfg.name} on S3: zarrfs dd", zarrfs_s3_read, b, cfg, endpoint, prefix, rep == 0)


def zarrfs_s3_read(b: Bench, cfg: Config, endpoint: str, prefix: str, verify: bool) -> None:
    """Cold dd of data on a fresh mount of the array on S3 (checked with cmp when `verify`)."""
    with b.mount(f"s3://{BUCKET}/{prefix}", f"endpoint_url={endpoint}") as m:
        b.res.add(cfg.name, "s3_zfs", dd(m.mp / "data", "/dev/null", expect=cfg.nbytes))
        if verify:  # from the page cache of the mount by now
            run_checked(["cmp", str(m.mp / "data"), str(cfg.raw)])
    b.res.add(cfg.name, "s3_rss", m.peak_rss)
