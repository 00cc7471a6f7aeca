"""`--profile`: one cold read with the daemon under py-spy, summarized per function."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

from .arrays import Config
from .common import dd, warm_files
from .context import Bench

# Leaf frames of threads that wait for work (py-spy counts some of these waits as active).
IDLE_LEAVES = (
    "WorkerThread._work (trio/_core/_thread_cache.py",
    "_worker (concurrent/futures/thread.py",
    "EpollIOManager.get_events (",
    "Condition.wait (threading.py",
    "Event.wait (threading.py",
    "_wait_for_tstate_lock (threading.py",
)


def profile(b: Bench, cfg: Config) -> None:
    out_dir = Path(b.args.profile_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / f"profile-cold-{cfg.slug}.txt"
    warm_files(cfg.path)
    with b.mount(cfg.path) as m:
        m.start_profile(out, b.args.profile_native)
        t = dd(m.mp / "data", "/dev/null", expect=cfg.nbytes)
        m.stop_profile()
    b.res.profile = {
        "config": cfg.name,
        "file": str(out),
        "seconds": t,
        "bytes": cfg.nbytes,
        "peak": m.peak_rss,
        **summarize_profile(out),
    }


def summarize_profile(path: Path, top: int = 25) -> dict[str, Any]:
    """Self and inclusive samples per function from py-spy's collapsed-stack output."""
    selfc: Counter[str] = Counter()
    incl: Counter[str] = Counter()
    total = 0
    if not path.exists():
        return {"samples": 0, "idle": 0, "top": [], "top_incl": []}
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
