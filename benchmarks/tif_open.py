#!/usr/bin/env python3
"""zarrfs benchmark, data.tif opens: what opening `data.tif` (open, fstat, close) costs the
first time and again (close-to-open: each open lists the array's stored objects again), for a
local plain array of 102400 chunks, the same in 400 shards, and 64 shards on S3 (a moto
server in a child process): seconds, the bytes the mount fetched (`zarrfs stats`) and its
store operations by kind (its metrics endpoint).

    .venv/bin/python benchmarks/tif_open.py [--dir /var/tmp] [--opens 3]

The arrays (about 800 MB, written by TensorStore) are deleted at the end.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import tensorstore as ts

sys.path.insert(0, str(Path(__file__).resolve().parent))

from zarrfs_bench.common import VENV_BIN, dir_files
from zarrfs_bench.mounting import Mount
from zarrfs_bench.s3 import BUCKET, environ, s3_server, s3_server_module

from zarrfs.api import read_stats

ZSTD = [{"name": "bytes"}, {"name": "zstd", "configuration": {"level": 1}}]


def written(path: Path, side: int, chunk: int, shard: int | None) -> None:
    """A side x side uint8 image in chunk x chunk chunks (inner chunks of shard x shard
    shards), zstd, every chunk stored (a gradient: about 4 KiB each)."""
    codecs: list[dict[str, Any]] = ZSTD
    grid = chunk
    if shard is not None:
        index = [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}]
        codecs = [{"name": "sharding_indexed", "configuration": {
            "chunk_shape": [chunk, chunk], "codecs": ZSTD, "index_codecs": index}}]
        grid = shard
    metadata = {"shape": [side, side], "data_type": "uint8", "fill_value": 0, "codecs": codecs,
                "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [grid, grid]}}}
    array = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path)},
                     "metadata": metadata, "create": True, "delete_existing": True}).result()
    rows = max(grid, 2048)
    y = np.arange(side, dtype=np.uint32)
    for top in range(0, side, rows):
        block = (y[top : top + rows, None] * 7 + y[None, :] * 3) % 251 + 1
        array[top : top + rows, :].write(block.astype(np.uint8)).result()


def operations(address: str) -> dict[str, float]:
    """Store operations so far by kind (the mount's metrics: zarrfs_store_request_seconds)."""
    text = urllib.request.urlopen(f"http://{address}/metrics", timeout=10).read().decode()
    counts: dict[str, float] = {}
    pattern = r'zarrfs_store_request_seconds_count\{[^}]*operation="(\w+)"[^}]*\} (\S+)'
    for kind, count in re.findall(pattern, text):
        counts[kind] = counts.get(kind, 0) + float(count)
    return counts


def opens(name: str, source: str, options: str, scratch: Path, times: int) -> None:
    port = 19700 + os.getpid() % 200
    mp = scratch / f"mnt-{name}"
    with Mount(str(VENV_BIN / "zarrfs"), source, mp, f"ro,metrics=127.0.0.1:{port}{options}") as mount:
        tif = mount.mp / "data.tif"
        for attempt in range(times + 1):
            fetched, before = read_stats(mount.mp)["bytes_fetched"], operations(f"127.0.0.1:{port}")
            start = time.perf_counter()
            fd = os.open(tif, os.O_RDONLY)
            size = os.fstat(fd).st_size
            os.close(fd)
            seconds = time.perf_counter() - start
            after = operations(f"127.0.0.1:{port}")
            ops = {kind: int(n - before.get(kind, 0)) for kind, n in after.items()
                   if n != before.get(kind, 0)}
            fetched = read_stats(mount.mp)["bytes_fetched"] - fetched
            label = "first" if attempt == 0 else "again"
            print(f"{name:>14} {label}: {seconds:7.3f} s  data.tif {size} B  fetched {fetched:.0f} B  "
                  f"store operations {ops}", flush=True)


def on_s3(path: Path, scratch: Path, times: int) -> None:
    import s3fs

    mod = s3_server_module()
    with environ(mod.S3_ENV), open(scratch / "moto.log", "ab") as log, s3_server(log) as endpoint:
        options = mod.S3Server(0, bucket=BUCKET).s3fs_options()
        options["client_kwargs"]["endpoint_url"] = endpoint
        fs = s3fs.S3FileSystem(**options)
        files = dir_files(path)
        fs.put([str(p) for p in files], [f"{BUCKET}/image/{p.relative_to(path)}" for p in files])
        opens("s3 64 shards", f"s3://{BUCKET}/image", f",endpoint_url={endpoint}", scratch, times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", default="/var/tmp", help="where the arrays are written (deleted at the end)")
    parser.add_argument("--opens", type=int, default=3, help="opens after the first")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="zarrfs-tif-open-", dir=args.dir))
    try:
        cases = [("plain 102400", 20480, 64, None), ("400 shards", 20480, 64, 1024),
                 ("64 shards", 4096, 64, 512)]
        for name, side, chunk, shard in cases:
            path = scratch / name.replace(" ", "-")
            written(path, side, chunk, shard)
            if name == "64 shards":
                on_s3(path, scratch, args.opens)
            else:
                opens(name, str(path), "", scratch, args.opens)
            shutil.rmtree(path)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
