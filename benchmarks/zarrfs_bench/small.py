"""Small chunks: what each chunk costs. A cold dd of a float32 array in chunks of 4 KiB and
64 KiB (zstd), beside TensorStore reading it. No target: the issue's arrays have chunks of
512 KiB and 1 MiB, but real data often comes in smaller ones."""

from __future__ import annotations

import shutil
import time

from .arrays import gen_array, ts_context, ts_create_spec, ts_open
from .common import MiB, dd, dir_bytes, fmt_size, log, warm_files
from .context import Bench

EDGES = (32, 128)  # float32 chunks of 32x32 (4 KiB) and 128x128 (64 KiB)
SMALL_BYTES = 64 * MiB


def small_chunks(b: Bench) -> None:
    import tensorstore as ts

    side = int((min(SMALL_BYTES, b.args.size) // 4) ** 0.5) // EDGES[-1] * EDGES[-1]
    data = gen_array("float32", (side, side), seed=4)
    for edge in EDGES:
        path = b.work / f"small-{edge}"
        spec = ts_create_spec(path, "float32", data.shape, (edge, edge), None, "zstd")
        ts.open(spec, create=True, context=ts_context()).result().write(data).result()
        name = f"float32/zstd {side}x{side} in {edge}x{edge} chunks"
        figures = b.res.small.setdefault(name, {"nbytes": data.nbytes, "stored": dir_bytes(path),
                                                 "chunk": edge * edge * 4, "ts": [], "zfs": [], "rss": []})
        log(f"small chunks: {name}, {fmt_size(figures['stored'])} stored")
        for _ in range(b.args.repeat):
            warm_files(path)
            t0 = time.perf_counter()
            out = ts_open(path).read().result()
            figures["ts"].append(time.perf_counter() - t0)
            del out
            warm_files(path)
            with b.mount(path) as m:
                figures["zfs"].append(dd(m.mp / "data", "/dev/null", expect=data.nbytes))
            figures["rss"].append(m.peak_rss)
        shutil.rmtree(path, ignore_errors=True)
