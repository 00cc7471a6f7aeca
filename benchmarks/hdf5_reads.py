#!/usr/bin/env python3
"""zarrfs benchmark, data.h5: random chunks of an array read through `data.h5` with h5py on a
fresh mount each run, its zstd chunks decoded by the mount (the default) and passed through as
stored (`-o filters=plugins`: hdf5plugin's zstd decodes them, the mount decodes nothing),
against zarr-python and TensorStore reading the same chunks of the store;
for an array of 16^2 chunks and one of 1,000^2 (sparse: the chunks read are stored), local
and (--s3) on a moto S3 server behind a proxy adding 10 ms each way (a 20 ms round trip), both
in child processes as benchmarks/latency.py has them.

    .venv/bin/python benchmarks/hdf5_reads.py [--chunks 64] [--repeat 3] [--s3] [--groups 24]

Prints a Markdown table of medians (seconds for all the chunks, and per chunk). With
--groups N, a second table: a hierarchy of N subgroups of two arrays each (no consolidated
metadata) opened whole, through the root's `data.h5` with h5py (its stat, then every
dataset's shape) on a fresh mount, against zarr-python listing every member.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import h5py
import hdf5plugin  # noqa: F401  (the zstd filter)
import numpy as np
import tensorstore as ts
import zarr
from zarr.codecs import ZstdCodec

sys.path.insert(0, str(Path(__file__).resolve().parent))
from zarrfs_bench.places import Where, on_s3

ZARRFS = str(Path(sys.executable).with_name("zarrfs"))
CHUNK = (256, 256)
Box = tuple[slice, slice]


def make(path: Path, grid: int, picked: list[tuple[int, int]]) -> None:
    """A uint16 array of grid^2 chunks of CHUNK; only the `picked` ones written."""
    array = zarr.create_array(path, shape=(grid * CHUNK[0], grid * CHUNK[1]), chunks=CHUNK, dtype="uint16",
                              compressors=ZstdCodec(level=1), fill_value=0)
    rng = np.random.default_rng(0)
    for i, j in picked:
        array[_box((i, j))] = rng.integers(0, 4000, CHUNK, dtype="uint16")


def _box(chunk: tuple[int, int]) -> Box:
    return (slice(chunk[0] * CHUNK[0], (chunk[0] + 1) * CHUNK[0]),
            slice(chunk[1] * CHUNK[1], (chunk[1] + 1) * CHUNK[1]))


@contextlib.contextmanager
def fresh_mount(store: Where, ready: str, *options: str) -> Iterator[Path]:
    """`store` mounted read-only on a new mountpoint, once `ready` there exists; unmounted after."""
    with tempfile.TemporaryDirectory() as mountpoint:
        daemon = subprocess.Popen([ZARRFS, "mount", "-f", store.url, mountpoint, "-o",
                                   store.mount_options(*options)])
        try:
            while not Path(mountpoint, ready).exists():
                time.sleep(0.05)
            yield Path(mountpoint)
        finally:
            subprocess.run(["fusermount3", "-u", mountpoint], check=False)
            daemon.wait(30)


def through_h5(store: Where, boxes: list[Box], options: tuple[str, ...] = ()) -> float:
    with fresh_mount(store, "data.h5", *options) as mountpoint:  # (its stat before the clock starts)
        start = time.perf_counter()
        with h5py.File(mountpoint / "data.h5", "r") as f:
            for box in boxes:
                f["data"][box]
        return time.perf_counter() - start


def make_groups(path: Path, count: int) -> None:
    root = zarr.open_group(str(path), mode="w", zarr_format=3)
    for i in range(count):
        group = root.create_group(f"g{i}")
        for name in ("a", "b"):
            array = group.create_array(name, shape=(64, 64), chunks=(32, 32), dtype="f4",
                                       dimension_names=["y", "x"])
            array[:] = 1.0


def group_through_h5(store: Where) -> float:
    with fresh_mount(store, "zarr.json") as mountpoint:
        start = time.perf_counter()
        with h5py.File(mountpoint / "data.h5", "r") as f:
            f.visititems(lambda _, item: item.shape if isinstance(item, h5py.Dataset) else None)
        return time.perf_counter() - start


def group_with_zarr(store: Where) -> float:
    start = time.perf_counter()
    root = zarr.open_group(store.url, mode="r", storage_options=store.storage_options())
    shapes = [member.shape for _, member in root.members(max_depth=None) if isinstance(member, zarr.Array)]
    assert len(shapes) == 2 * len(list(root.group_keys()))
    return time.perf_counter() - start


def with_zarr(store: Where, boxes: list[Box]) -> float:
    start = time.perf_counter()
    array = zarr.open_array(store.url, mode="r", storage_options=store.storage_options())
    for box in boxes:
        array[box]
    return time.perf_counter() - start


def with_tensorstore(store: Where, boxes: list[Box]) -> float:
    start = time.perf_counter()
    array = ts.open({"driver": "zarr3", "kvstore": store.kvstore()}).result()
    for box in boxes:
        array[box].read().result()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--s3", action="store_true", help="also on S3 behind a 20 ms proxy")
    parser.add_argument("--groups", type=int, default=0, help="also open a hierarchy of this many groups")
    args = parser.parse_args()
    readers: dict[str, Callable[[Where, list[Box]], float]] = {
        "h5py via data.h5 (decoded)": through_h5,
        "h5py via data.h5 (filters=plugins)": functools.partial(through_h5, options=("filters=plugins",)),
        "zarr-python": with_zarr, "TensorStore": with_tensorstore}
    print(f"load average {os.getloadavg()[0]:.1f}\n")
    print("| array | where | reader | seconds | ms per chunk | / zarr-python |\n|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as scratch:
        boxes, stores = {}, []
        for grid in (16, 1000):
            rng = np.random.default_rng(grid)
            picked = sorted({(int(i), int(j)) for i, j in rng.integers(0, grid, (args.chunks, 2))})
            stores.append(Path(scratch, f"a{grid}.zarr"))
            make(stores[-1], grid, picked)
            boxes[stores[-1].name] = [_box(chunk) for chunk in picked]
        places: list[tuple[str, list[Where]]] = [("local", [Where(str(store)) for store in stores])]
        with contextlib.ExitStack() as stack:
            if args.s3:
                places.append(("S3 + 20 ms", stack.enter_context(on_s3(stores, Path(scratch, "s3.log")))))
            for place, wheres in places:
                for store, where in zip(stores, wheres, strict=True):
                    chunks = boxes[store.name]
                    times = {name: statistics.median(reader(where, chunks) for _ in range(args.repeat))
                             for name, reader in readers.items()}
                    for name, seconds in times.items():
                        print(f"| {store.stem[1:]}^2 chunks | {place} | {name} | {seconds:.3f} "
                              f"| {1000 * seconds / len(chunks):.2f} "
                              f"| {seconds / times['zarr-python']:.2f} |")
            if args.groups:
                _groups_table(args, stores[-1].parent, stack)


def _groups_table(args: argparse.Namespace, scratch: Path, stack: contextlib.ExitStack) -> None:
    tree = scratch / "groups.zarr"
    make_groups(tree, args.groups)
    places = [("local", Where(str(tree)))]
    if args.s3:
        places.append(("S3 + 20 ms", stack.enter_context(on_s3([tree], scratch / "s3-groups.log"))[0]))
    print(f"\n| {args.groups} groups of 2 arrays | where | reader | seconds | / zarr-python |")
    print("|---|---|---|---|---|")
    for place, where in places:
        openers = (("h5py via data.h5", group_through_h5), ("zarr-python", group_with_zarr))
        times = {name: statistics.median(open_whole(where) for _ in range(args.repeat))
                 for name, open_whole in openers}
        for name, seconds in times.items():
            print(f"| | {place} | {name} | {seconds:.3f} | {seconds / times['zarr-python']:.2f} |")


if __name__ == "__main__":
    main()
