"""Coherence within one mount: no read mixes two versions of one chunk.

Torn reads: one process rewrites a whole chunk (chunk (3, 7), the last of its row band, so
`data.npy`'s page boundaries split its rows) through its chunk file, one pwrite of 32 KiB,
all elements = k for k = 1, 2, ...; another reads it 2,000 times; every read must be uniform.

* test_whole_chunk_rewrites_are_never_torn: reads the daemon answers in one reply: the chunk
  file (all of it, or a range starting and ending mid-row), one row of the chunk through
  `data` (within one page), one page of `data.npy` (the chunk's elements of two rows);
* test_whole_chunk_rewrites_are_never_torn_in_reads_of_many_pages: one pread of the chunk's
  64 rows (64 pages) through `data` (long-lived fd or fresh open) and `data.npy`.

ZARRFS_SOAK_ROUNDS=N runs each N times (tests/reliability/test_coherence_rounds.py).
"""

from __future__ import annotations

import os
import random
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers.coherence import (
    BASE_SEED,
    CHUNKS,
    ITEM,
    SHAPE,
    SOAK_RUNS,
    TOTALS,
    View,
    child,
    chunk_name,
    npy_header_length,
    report,
    run_children,
)

pytestmark = pytest.mark.skipif(
    not os.path.exists("/dev/fuse") or shutil.which("fusermount3") is None,
    reason="needs FUSE (/dev/fuse and fusermount3)",
)


TORN_READS = 2000


TORN_CHUNK = (3, 7)


PAGE = 4096
PAGED_KINDS = {"data", "data fresh", "npy"}  # whole-chunk reads of many pages


# -- torn reads ---------------------------------------------------------------------------------


def rewriter_main(mountpoint: str, barrier: Any, stop: Any) -> dict[str, Any]:
    """Rewrite the whole of TORN_CHUNK through its chunk file, all elements = k, k = 1, 2, ..."""
    fd = os.open(os.path.join(mountpoint, chunk_name(*TORN_CHUNK)), os.O_RDWR)
    size = CHUNKS[0] * CHUNKS[1]
    try:
        assert os.pwrite(fd, np.zeros(size, "<u4").tobytes(), 0) == size * ITEM
        barrier.wait()
        k = 0
        while not stop.is_set():
            k += 1
            assert os.pwrite(fd, np.full(size, k, "<u4").tobytes(), 0) == size * ITEM
            if k % 200 == 0:
                os.fsync(fd)  # written back: the chunk is saved and may be evicted and reloaded
    finally:
        os.close(fd)
    return {"rewrites": k}


def uniform_reader_main(mountpoint: str, seed: int, reads: int, kinds: list[str], barrier: Any,
                        stop: Any) -> dict[str, Any]:
    """Read TORN_CHUNK `reads` times, in turn through each kind of read; count the reads that
    are not uniform (all elements equal)."""
    rng = random.Random(seed)
    i, j = TORN_CHUNK
    header = npy_header_length(mountpoint)
    chunk = View(chunk_name(i, j), chunk=(i, j))
    data, npy = View("data"), View("data.npy", header)
    band = np.arange(i * CHUNKS[0], (i + 1) * CHUNKS[0])
    all_rows = np.repeat(band, CHUNKS[1])
    all_cols = np.tile(np.arange(j * CHUNKS[1], (j + 1) * CHUNKS[1]), CHUNKS[0])
    long = {v.name: os.open(os.path.join(mountpoint, v.name), os.O_RDONLY)
            for v in (chunk, data, npy)}
    counts: Counter[str] = Counter()
    examples: list[str] = []
    seen: set[int] = set()

    def one_read(kind: str) -> np.ndarray:
        if kind == "chunk part":  # elements [a, b) of the chunk file, starting and ending mid-row
            a = rng.randrange(1, CHUNKS[1]) + CHUNKS[1] * rng.randrange(CHUNKS[0] - 2)
            b = rng.randrange(a + CHUNKS[1], CHUNKS[0] * CHUNKS[1])
            raw = os.pread(long[chunk.name], (b - a) * ITEM, a * ITEM)
            return np.frombuffer(raw, "<u4")
        if kind == "data one row":  # the chunk's 128 elements of one row: within one page
            r = rng.randrange(CHUNKS[0])
            part = slice(r * CHUNKS[1], (r + 1) * CHUNKS[1])
            return data.read(long[data.name], all_rows[part], all_cols[part])
        if kind == "npy one page":
            # One page of data.npy, from the last 32 elements of row r - 1 of the array to the
            # first 992 of row r: the chunk's elements of both rows (a page the daemon answers
            # from two regions of the chunk).
            r = i * CHUNKS[0] + 1 + rng.randrange(CHUNKS[0] - 1)
            first = (r - 1) * SHAPE[1] + SHAPE[1] - 32
            assert (header + first * ITEM) % 4096 == 0
            raw = np.frombuffer(os.pread(long[npy.name], 4096, header + first * ITEM), "<u4")
            return np.concatenate([raw[:32], raw[32 + j * CHUNKS[1]: 32 + SHAPE[1] - 32]])
        view = {"chunk": chunk, "data": data, "data fresh": data, "npy": npy}[kind]
        if kind == "data fresh":
            fd = os.open(os.path.join(mountpoint, view.name), os.O_RDONLY)
            try:
                return view.read(fd, all_rows, all_cols)
            finally:
                os.close(fd)
        return view.read(long[view.name], all_rows, all_cols)

    # The page of the file each element of a whole-chunk read lies in.
    pages = {kind: (view.header + view.positions(all_rows, all_cols) * ITEM) // PAGE
             for kind, view in (("data", data), ("data fresh", data), ("npy", npy))}
    barrier.wait()
    try:
        for n in range(reads):
            kind = kinds[n % len(kinds)]
            got = one_read(kind)
            counts["reads"] += 1
            counts[f"reads {kind}"] += 1
            values = np.unique(got)
            seen.update(values.tolist()[:2])
            if kind in PAGED_KINDS and len(values) != 1:
                # A read of many pages overlapping a rewrite may see it partly (the kernel
                # fills the pages from several replies, as a local file system may too); each
                # page is one reply, so each page must be one version.
                counts["multi_version"] += 1
                values = max((np.unique(got[pages[kind] == p]) for p in np.unique(pages[kind])), key=len)
            if len(values) != 1:
                counts["non_uniform"] += 1
                counts[f"non_uniform {kind}"] += 1
                if len(examples) < 8:
                    versions, number = np.unique(got, return_counts=True)
                    examples.append(f"read {n} through {kind}: {len(versions)} versions in one "
                                    f"read of {got.size} elements: " + ", ".join(
                                        f"{int(v)} x{int(c)}"
                                        for v, c in zip(versions, number, strict=True)))
    finally:
        stop.set()
        for fd in long.values():
            os.close(fd)
    return {"counts": dict(counts), "examples": examples, "versions_seen": len(seen)}


def run_torn(tmp_path: Path, request: pytest.FixtureRequest, run: int, test: str,
             kinds: list[str]) -> None:
    """The rewriter and a reader of TORN_CHUNK through `kinds`; no read may be torn."""
    seed = BASE_SEED * 1000 + run

    def start(context: Any, mp_path: str, results: Any) -> tuple[list[Any], list[Any]]:
        barrier = context.Barrier(2, timeout=120)
        stop = context.Event()
        return [
            context.Process(target=child, name="rewriter",
                            args=(rewriter_main, "rewriter", results, mp_path, barrier, stop)),
            context.Process(target=child, name="reader",
                            args=(uniform_reader_main, "reader", results, mp_path, seed,
                                  TORN_READS, kinds, barrier, stop)),
        ], [barrier, stop]

    found, seconds = run_children(tmp_path, start)
    counts = Counter(found["reader"]["counts"])
    rewrites = found["rewriter"]["rewrites"]
    figures = {"chunk_rewrites": rewrites, "uniform_reads": counts["reads"],
               "non_uniform": counts["non_uniform"], "multi_version_reads": counts["multi_version"]}
    TOTALS.update({f"{test} {name}": value for name, value in figures.items()})
    by_kind = {kind: f"{counts[f'non_uniform {kind}']}/{counts[f'reads {kind}']}" for kind in kinds}
    report(request, {"test": f"coherence-{test}", "run": run, "seed": seed, **figures,
                     "versions_seen": found["reader"]["versions_seen"], "detail": dict(counts),
                     "seconds": round(seconds, 1)},
           f"{test} run {run} (seed {seed}): {rewrites} whole-chunk rewrites while "
           f"{counts['reads']} reads ran ({found['reader']['versions_seen']} versions seen): "
           f"{counts['non_uniform']} non-uniform (non-uniform/reads by kind: {by_kind}); "
           f"{counts['multi_version']} reads of many pages saw a rewrite partly; "
           f"{seconds:.0f} s")
    assert counts["reads"] == TORN_READS
    assert counts["non_uniform"] == 0, (
        f"seed {seed}: {counts['non_uniform']} of {TORN_READS} reads mixed versions of one chunk:\n"
        + "\n".join(found["reader"]["examples"]))
    assert found["reader"]["versions_seen"] > 1, "the reads never saw the chunk change"


@pytest.mark.parametrize("run", range(SOAK_RUNS))
def test_whole_chunk_rewrites_are_never_torn(tmp_path: Path, request: pytest.FixtureRequest,
                                             run: int) -> None:
    """Reads the daemon answers in one reply: the chunk file (direct_io; all of it, or a range
    starting and ending mid-row, which the daemon reads as three regions of the chunk), one
    row of the chunk through `data` (within one page) and one page of `data.npy` (holding
    the chunk's elements of two rows)."""
    run_torn(tmp_path, request, run, "torn",
             ["chunk", "chunk part", "data one row", "npy one page"])


@pytest.mark.parametrize("run", range(SOAK_RUNS))
def test_whole_chunk_rewrites_are_never_torn_in_reads_of_many_pages(
        tmp_path: Path, request: pytest.FixtureRequest, run: int) -> None:
    """One pread of the chunk's 64 rows (64 pages, 256 KiB) through `data` (long-lived fd or
    fresh open) and through `data.npy`: the kernel fills those pages from several requests,
    and keeps the ones it has, so a read overlapping a rewrite may see it partly (counted and
    reported); every page of it is one reply, hence one version of the chunk (asserted)."""
    run_torn(tmp_path, request, run, "torn-pages", ["data", "data fresh", "npy"])
