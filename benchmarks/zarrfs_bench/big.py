"""The --big array: the daemon's memory while streaming it, and what one inner chunk of a
large shard costs in store bytes."""

from __future__ import annotations

from typing import Any

import numpy as np

from .arrays import BIG_PIECE, Config, big_base
from .common import dd, warm_files
from .context import Bench
from .mounting import proc_io, proc_status
from .workers import worker


def memory(b: Bench, big: Config) -> None:
    """The daemon's VmHWM after streaming the big array with dd, and the peak PSS of all the
    mount's processes together (its decoding processes too) while it streamed."""
    warm_files(big.path)
    with b.mount(big.path) as m:
        assert m.pid is not None
        t = dd(m.mp / "data", "/dev/null", expect=big.nbytes, timeout=1800)
        hwm = proc_status(m.pid, "VmHWM")
    b.res.memory = {
        "bytes": big.nbytes,
        "stored": big.stored,
        "seconds": t,
        "hwm": hwm,
        "peak": m.peak_rss,
        "pss": m.peak_pss,
        "opts": b.mount_opts(),
    }


def shard_cost(b: Bench, big: Config) -> None:
    """Store bytes the daemon reads (its rchar) to serve a 4 KiB page that lies inside one
    inner chunk of the first shard, on a fresh mount (index + that chunk expected), then a
    page of the next inner chunk of the same shard (the index is cached by then: that chunk
    alone). POSIX_FADV_RANDOM keeps the kernel from reading ahead."""
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
    with b.mount(big.path) as m:
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
    base["peak"] = m.peak_rss
    b.res.shard = base
