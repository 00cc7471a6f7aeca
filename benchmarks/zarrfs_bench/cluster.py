"""The measurements of `benchmarks/cluster.py`: the test suite's cluster workload
(tests/helpers/cluster.py) for each N, on a fresh array and fresh mounts per run."""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from .common import REPO, log
from .s3 import BUCKET, environ, s3_server, s3_server_module

# tests/helpers/cluster.py imports the other helpers as `tests.helpers`.
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.helpers import cluster
from zarrfs.api import read_stats


def run_once(endpoint: str, nodes: int, rounds: int, run: int, work: Path) -> dict[str, Any]:
    """One run: a new array, `nodes` fresh mounts, the rounds, unmounts, zarr-python's check."""
    url = f"s3://{BUCKET}/cluster-{nodes}-{run}"
    storage = {"endpoint_url": endpoint, "key": "testing", "secret": "testing"}
    cluster.create_array(url, storage)
    layout = cluster.Layout(nodes, rounds)
    began = time.perf_counter()
    with cluster.cluster_mounts(url, work / f"{nodes}-{run}", nodes,
                                ["cache=16M", f"endpoint_url={endpoint}"]) as mounts:
        started = time.perf_counter()
        results = cluster.run_writers([m.data for m in mounts], layout)
        wrote = time.perf_counter() - started
        conflicts = sum(int(read_stats(m.path)["write_conflicts"]) for m in mounts)
    failed = [m.log() for m in mounts if m.process.returncode != 0]
    if failed:
        raise RuntimeError(f"a daemon failed:\n{failed[0]}")
    stored = cluster.read_array(url, storage)
    lost = cluster.missing(stored, results)
    log(f"N={nodes} run {run}: {wrote:.1f} s of writing ({time.perf_counter() - began:.1f} s in all), "
        f"{conflicts} conflicts, {len(lost)} acknowledged writes lost")
    return {"fsync": [s for r in results for s in r.fsync_seconds], "conflicts": conflicts,
            "acknowledged": sum(len(r.acknowledged) for r in results), "lost": len(lost),
            "errors": [e for r in results for e in r.errors], "seconds": wrote}


def measure(nodes: list[int], rounds: int, repeat: int) -> dict[int, dict[str, Any]]:
    figures: dict[int, dict[str, Any]] = {}
    mod = s3_server_module()
    logfile_path = Path(tempfile.gettempdir()) / "zarrfs-cluster-server.log"
    with environ(mod.S3_ENV), open(logfile_path, "ab") as logfile, s3_server(logfile) as endpoint, \
            tempfile.TemporaryDirectory(prefix="zarrfs-cluster-") as work:
        for n in nodes:
            runs = [run_once(endpoint, n, rounds, run, Path(work)) for run in range(repeat)]
            figures[n] = {
                "fsync": [s for r in runs for s in r["fsync"]],
                **{k: sum(r[k] for r in runs) for k in ("conflicts", "acknowledged", "lost", "seconds")},
                "errors": [e for r in runs for e in r["errors"]],
            }
    return figures


def render(figures: dict[int, dict[str, Any]], rounds: int, repeat: int) -> str:
    lines = [
        f"# Cluster: N mounts writing the same two shards on S3 (moto), {rounds} rounds x {repeat} runs",
        "",
        "| N mounts | fsyncs | acknowledged | p50 fsync (s) | p90 (s) | max (s) | conflicts | "
        "conflicts per fsync | lost | writing (s) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n, f in figures.items():
        p50, p90 = (np.percentile(f["fsync"], q) for q in (50, 90))
        lines.append(f"| {n} | {len(f['fsync'])} | {f['acknowledged']} | {p50:.3f} | {p90:.3f} | "
                     f"{max(f['fsync']):.3f} | {f['conflicts']} | {f['conflicts'] / len(f['fsync']):.1f} | "
                     f"{f['lost']} | {f['seconds']:.1f} |")
    errors = [e for f in figures.values() for e in f["errors"]]
    lines += ["", f"Failed fsyncs: {len(errors)}" + "".join(f"\n- {e}" for e in errors[:10])]
    with open("/proc/loadavg") as f:
        lines += ["", f"Load average at the end: {' '.join(f.read().split()[:3])}"]
    return "\n".join(lines)


def main(doc: str | None = None) -> None:
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", default="1,4,8", help="numbers of mounts, one measurement each")
    p.add_argument("--rounds", type=int, default=8, help="fsyncs per mount and run")
    p.add_argument("--repeat", type=int, default=2, help="runs per N, each on a new array")
    p.add_argument("--out", default=str(Path(tempfile.gettempdir()) / "zarrfs-cluster.md"))
    a = p.parse_args()
    figures = measure([int(n) for n in a.nodes.split(",")], a.rounds, a.repeat)
    text = render(figures, a.rounds, a.repeat)
    print(text)
    Path(a.out).write_text(text + "\n")
    log(f"wrote {a.out}")
