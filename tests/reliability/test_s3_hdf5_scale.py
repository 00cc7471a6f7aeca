"""data.h5 of an array on S3 behind a 20 ms proxy (issue 60): a reader of one chunk of a sparse
array of 10^6 chunks pays, in store requests, what a reader of one chunk of a 16-chunk twin
pays: the few metadata objects at the open (no listing), listings of the rows of chunks of the B-tree
leaf indexing the chunk (at most its 512 chunks: their stored sizes), and the chunk. The
twins' chunks are zlib streams, passed through as stored (zstd chunks are served decoded,
which costs the leaf nothing). Counted with the daemon's request log; the time is
benchmarks/hdf5_reads.py's."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import h5py
import hdf5plugin  # noqa: F401  (the zstd filter)
import numpy as np

from tests.helpers.mounting import mounted
from tests.helpers.netproxy import proxied
from tests.helpers.s3_server import S3Server
from tests.helpers.scale_arrays import ZLIB, RequestLog, Requests, twin_on_s3, values
from zarrfs.views.hdf5.structures import NODE_ENTRIES as PAGE  # (chunks a leaf indexes)

CHUNK = (16, 16)
FEW = 16  # (metadata, a directory or two)
DELAY = 0.01  # (each way: a 20 ms round trip)


def one_chunk_read(server: S3Server, url: str, mountpoint: Path, log: RequestLog,
                   chunk: tuple[int, int]) -> tuple[Requests, Requests]:
    """The requests of opening data.h5 with h5py, then of reading `chunk` through it."""
    with proxied(server.port, delay=DELAY) as proxy, \
            mounted(url, mountpoint, [f"endpoint_url={proxy.url}", "ro"], env=log.env) as mount:
        log.take()
        with h5py.File(mount.path / "data.h5", "r") as f:
            opened = log.take()
            start = (chunk[0] * CHUNK[0], chunk[1] * CHUNK[1])
            stop = (start[0] + CHUNK[0], start[1] + CHUNK[1])
            got = f["data"][start[0]:stop[0], start[1]:stop[1]]
            read = log.take()
        assert np.array_equal(got, values(start, stop))
    return opened, read


def test_one_chunk_of_a_sparse_giant_on_s3_costs_what_one_of_a_small_twin_does(
        s3_server: S3Server, tmp_path: Path) -> None:
    small = twin_on_s3(s3_server, tmp_path, (4, 4), CHUNK, name="small.zarr", compression=ZLIB)
    huge = twin_on_s3(s3_server, tmp_path, (1000, 1000), CHUNK, name="huge.zarr",
                      stored=[(0, 0), (500, 700), (999, 999)], compression=ZLIB)
    log = RequestLog(tmp_path / "requests.log")
    costs = {name: one_chunk_read(s3_server, url, tmp_path / f"mnt-{name}", log, chunk)
             for name, url, chunk in [("small", small, (2, 3)), ("huge", huge, (500, 700))]}
    for name, (opened, read) in costs.items():
        assert opened.listed() == 0 and opened.read() == 0 and opened.count() <= FEW, (name, opened.summary())
        # (on S3 the stored sizes of the page's chunks come from listings of their rows of chunks)
        assert read.listed() <= PAGE and read.read() <= 1, (name, read.summary())
        assert read.count() <= PAGE + FEW, (name, read.summary())
        print(name, "open:", opened.summary(), "read:", read.summary())
    # (requests, not only the objects they name: a listing of an empty row of chunks names none)
    assert len(costs["huge"][1]) <= len(costs["small"][1]), (costs["huge"][1], costs["small"][1])
    small_cost = sum(r.count() for r in costs["small"])
    assert sum(r.count() for r in costs["huge"]) <= small_cost + PAGE, costs
    assert os.listdir(tmp_path / "mnt-huge") == []  # (unmounted)


def test_a_walk_of_a_sparse_giant_on_s3_costs_what_its_stored_chunks_cost(
        s3_server: S3Server, tmp_path: Path) -> None:
    """`h5ls -v` walks the whole index (issue 76): on the giant of 10^6 chunks, three stored,
    at most twice the requests of the 16-chunk twin's walk plus listings (of the rows'
    directory, then of each row stored), in about the twin's time; the storage size counts
    the stored chunks and the fill chunk for each of the others."""
    sources = {name: twin_on_s3(s3_server, tmp_path, grid, CHUNK, name=f"{name}.zarr", compression=ZLIB,
                                stored=stored)
               for name, grid, stored in [("small", (4, 4), None),
                                          ("huge", (1000, 1000), [(0, 0), (500, 700), (999, 999)])]}
    log = RequestLog(tmp_path / "requests.log")
    walks: dict[str, tuple[float, Requests, str]] = {}
    for name, url in sources.items():
        with proxied(s3_server.port, delay=DELAY) as proxy, \
                mounted(url, tmp_path / f"walk-{name}", [f"endpoint_url={proxy.url}", "ro"],
                        env=log.env) as mount:
            os.stat(mount.path / "data.h5")
            log.take()
            started = time.monotonic()
            out = subprocess.run(["h5ls", "-v", str(mount.path / "data.h5")], check=True, capture_output=True,
                                 text=True).stdout
            walks[name] = (time.monotonic() - started, log.take(), out)
    print({name: (f"{seconds:.2f} s", requests.summary()) for name, (seconds, requests, _) in walks.items()})
    (small_seconds, small, _), (seconds, huge, out) = walks["small"], walks["huge"]
    listings = len(huge.of_kind("list"))
    assert len(huge) <= 2 * len(small) + listings and huge.read() == 0, (huge.summary(), small.summary())
    assert listings <= 1 + 2 * 3, huge.summary()
    assert seconds <= 3 * small_seconds + 5.0, (seconds, small_seconds)
    stored = [p.stat().st_size for p in (tmp_path / "huge.zarr" / "c").rglob("*") if p.is_file()]
    fill = len(ZLIB.compress(bytes(CHUNK[0] * CHUNK[1])))  # (each chunk not stored: the fill chunk)
    allocated = sum(stored) + (1000 * 1000 - len(stored)) * fill
    assert f"Storage:   256000000 logical bytes, {allocated} allocated bytes" in out, out
