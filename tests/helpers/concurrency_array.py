"""The array of tests/reliability/test_concurrency.py (uint32, 8192 x 4096, chunks of 256 x 512,
zstd, mounted with cache=32M): its rows' parts (owned by one process, shared, only read), the
values written there, and the checks of what the mount and the store hold at the end, and of
the daemon's memory."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np

from tests.helpers.mounting import ZARRFS, Mount

SOAK = int(os.environ.get("ZARRFS_SOAK", "0") or 0)
SECONDS = max(SOAK, 10)
PROCESSES = 8
SHAPE = (8192, 4096)
CHUNKS = (256, 512)
OWNED_END = 2048  # rows [0, OWNED_END): row r belongs to process r % PROCESSES
SHARED_END = 2304  # rows [OWNED_END, SHARED_END): written by every process
CACHE = 32 << 20
RSS_MARGIN = 150 << 20
ITEM = 4
ROW_BYTES = SHAPE[1] * ITEM


def initial(rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """The value every element starts with: its flat index (below 2^28)."""
    return (rows * SHAPE[1] + cols).astype(np.uint32)


def written_value(process: int, gen: int) -> int:
    """What write `gen` of `process` puts in every element it covers."""
    return (process + 1) << 28 | gen


def memory(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM of a process, in bytes."""
    found = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            name, _, rest = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                found[name] = int(rest.split()[0]) * 1024
    return found


def create_array(root: Path) -> None:
    import tensorstore as ts

    subprocess.run([ZARRFS, "create", str(root), "--shape", f"{SHAPE[0]},{SHAPE[1]}",
                    "--dtype", "uint32", "--chunks", f"{CHUNKS[0]},{CHUNKS[1]}",
                    "--codec", "zstd:1"], check=True, capture_output=True)
    spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(root)}}
    array = ts.open(spec, open=True).result()
    array.write(np.arange(SHAPE[0] * SHAPE[1], dtype=np.uint32).reshape(SHAPE)).result()


def read_mount(mount: Mount) -> np.ndarray:
    out = np.empty(SHAPE[0] * SHAPE[1] * ITEM, dtype=np.uint8)
    with open(mount.data, "rb", buffering=0) as f:
        assert f.readinto(memoryview(out)) == out.size  # type: ignore[attr-defined]
    return out.view("<u4").reshape(SHAPE)


def tensorstore_read(root: Path) -> np.ndarray:
    import tensorstore as ts

    spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(root)}}
    return np.asarray(ts.open(spec, open=True).result().read().result())


def check_final(array: np.ndarray, out: Path, what: str) -> None:
    """Every process's rows hold its last writes; every shared element a written value."""
    rows = np.arange(SHAPE[0])[:, None]
    cols = np.arange(SHAPE[1])[None, :]
    for p in range(PROCESSES):
        model = np.load(out / f"process{p}.model.npy")
        got = array[p:OWNED_END:PROCESSES]
        if not np.array_equal(got, model):
            k, c = np.argwhere(got != model)[0]
            raise AssertionError(
                f"{what}: process {p}'s rows lost updates: {int((got != model).sum())} elements "
                f"differ, the first at ({k * PROCESSES + p}, {c}): {int(got[k, c]):#010x} "
                f"instead of {int(model[k, c]):#010x}")
    assert np.array_equal(array[SHARED_END:], initial(rows[SHARED_END:], cols)), (
        f"{what}: the read-only rows changed")
    shared = array[OWNED_END:SHARED_END]
    r = np.arange(OWNED_END, SHARED_END)[:, None] + np.zeros_like(shared, dtype=np.int64)
    c = np.zeros_like(shared, dtype=np.int64) + cols
    explained = shared == initial(r, c)
    owner = (shared >> 28).astype(np.int64) - 1
    gen = (shared & np.uint32(0x0FFFFFFF)).astype(np.int64)
    for p in range(PROCESSES):
        log = np.load(out / f"process{p}.shared.npy")
        if not len(log):
            continue
        table = np.full((int(log[:, 0].max()) + 1, 3), -1, dtype=np.int64)
        table[log[:, 0]] = log[:, 1:]
        mine = (owner == p) & (gen < len(table))
        found = table[np.where(mine, gen, 0)]
        explained |= mine & (found[..., 0] == r) & (found[..., 1] <= c) & (c < found[..., 2])
    if not explained.all():
        k, col = np.argwhere(~explained)[0]
        raise AssertionError(f"{what}: {int((~explained).sum())} shared elements hold values no "
                             f"write put there, the first ({OWNED_END + k}, {col}): "
                             f"{int(shared[k, col]):#010x}")
