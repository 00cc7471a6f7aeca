"""Random 512x512 tiles of a large image, as viewers read them: through `data.tif` of a fresh
mount (tifffile's zarr interface, GDAL windows), the same readers on a local copy of the same
file, TensorStore reading the same tiles from the Zarr array, and `np.memmap` of `data` (the
row-major flat view). Plain and sharded arrays, local and on S3 (the moto server of `s3.py`).

Each reader runs in a child process and reads `--tiles` tiles at random tile positions (the
same positions for every reader of a repeat); its seconds exclude opening. zarrfs's counters
say how many chunks the daemon decoded and how many bytes it fetched. The same readers also read
the local copy through a bare pyfuse3 server (`fuse_floor.py`): what any Python FUSE daemon
costs them here, the floor under zarrfs's figures. A default mount decodes zstd tiles, so the
copies are two: the file a default mount serves (uncompressed tiles), and the one a
`filters=plugins` mount serves (the stored zstd tiles), which tifffile reads through the bare
server too, decoding them itself: what a decoded tile is measured against (issue 87 item 5)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, NamedTuple

import numpy as np

from .arrays import gen_array, ts_create_spec, ts_open
from .common import HERE, VENV_BIN, log, median, parse_size
from .fuse_floor import passed_through
from .mounting import Mount
from .s3 import BUCKET, environ, s3_server, s3_server_module, upload

TILE = 512
TILES_PY = HERE / "tiles.py"
READERS = ("tifffile", "gdal")
# GDAL's Python bindings are Debian's (python3-gdal), for the system's python3.
GDAL_READER = """
import json, sys, time
from osgeo import gdal
path, positions, warm, at = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], json.loads(sys.argv[4])
# (warmed up on a tile of a local file first: GDAL's first window imports numpy, 40 ms)
warmed = gdal.Open(warm)  # (kept: a band outlives no dataset)
warmed.GetRasterBand(1).ReadAsArray(at[1], at[0], 512, 512)
dataset = gdal.Open(path)
band = dataset.GetRasterBand(1)
t0 = time.perf_counter()
total = sum(int(band.ReadAsArray(x, y, 512, 512).astype("int64").sum()) for y, x in positions)
print(json.dumps({"seconds": time.perf_counter() - t0, "checksum": total}))
"""


class Warm(NamedTuple):
    """Where a reader reads one tile before it is timed (never the file it is timed on), and
    the tile: outside the timed ones."""

    where: str
    at: list[int]


class Copy(NamedTuple):
    """The local copy of a default mount's `data.tif` (tiles decoded), that of a
    `filters=plugins` mount's (tiles as stored), and the block size the mount gives the file."""

    path: Path
    stored: Path
    blksize: int


def read_tiles(kind: str, where: str, positions: list[list[int]], shape: list[int],
               warm: Warm | None) -> dict[str, Any]:
    """The child process: read the tiles at `positions` (y, x) with reader `kind`, timed from
    after it opened `where` and read the tile `warm` names (a reader's own start-up, which a
    viewer pays once: 3 ms of tifffile's and zarr's first tile)."""
    if warm is not None:
        _read(kind, _opened(kind, warm.where, shape), [warm.at])
    tiles = _opened(kind, where, shape)
    t0 = time.perf_counter()
    total = _read(kind, tiles, positions)
    return {"seconds": time.perf_counter() - t0, "checksum": total}


def _opened(kind: str, where: str, shape: list[int]) -> Any:
    if kind == "tifffile":
        import tifffile
        import zarr

        return zarr.open_array(tifffile.imread(where, aszarr=True), mode="r")
    if kind == "memmap":
        return np.memmap(where, dtype="<u2", mode="r", shape=tuple(shape))
    return ts_open(json.loads(where))


def _read(kind: str, tiles: Any, positions: list[list[int]]) -> int:
    total = 0
    for y, x in positions:
        block = tiles[y : y + TILE, x : x + TILE]
        total += int(np.asarray(block.read().result() if kind == "tensorstore" else block, "int64").sum())
    return total


def child(kind: str, where: str, positions: list[list[int]], shape: tuple[int, ...],
          warm: Warm | None) -> dict[str, Any]:
    if kind == "gdal":
        assert warm is not None
        command = ["/usr/bin/python3", "-c", GDAL_READER, where, json.dumps(positions), warm.where,
                   json.dumps(warm.at)]
    else:
        command = [sys.executable, str(TILES_PY), "--_worker", "tiles", kind, where, json.dumps(positions),
                   json.dumps(list(shape)), json.dumps(warm)]
    out = subprocess.run(command, check=True, capture_output=True, text=True, timeout=600).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def zarrfs_counters(mp: Path) -> dict[str, float]:
    out = subprocess.run([str(VENV_BIN / "zarrfs"), "stats", "--json", str(mp)], check=True,
                         capture_output=True, text=True).stdout
    return dict(json.loads(out))


def build(work: Path, shape: tuple[int, int], sharded: bool) -> Path:
    import tensorstore as ts

    path = work / ("sharded" if sharded else "plain")
    spec = ts_create_spec(path, "uint16", shape, (TILE, TILE), (4096, 4096) if sharded else None, "zstd")
    array = ts.open(spec, create=True, delete_existing=True).result()
    array.write(gen_array("uint16", shape, seed=5)).result()
    return path


def positions_for(shape: tuple[int, int], count: int, seed: int) -> list[list[int]]:
    """`count` tile positions at random, then one more: where readers warm up."""
    rng = np.random.default_rng(seed)
    rows, columns = shape[0] // TILE, shape[1] // TILE
    picked = rng.choice(rows * columns, size=count + 1, replace=False)
    return [[int(p // columns) * TILE, int(p % columns) * TILE] for p in picked]


def one_repeat(source: str, opts: str, copy: Copy, kvstore: dict[str, Any], shape: tuple[int, int],
               picked: list[list[int]], work: Path, readers: tuple[str, ...] = READERS,
               memmap: bool = True) -> dict[str, Any]:
    """Every reader once on the same tiles (`picked`, but the last: where each warms up, on a
    local file); zarrfs on a fresh mount per reader."""
    positions, at = picked[:-1], picked[-1]
    kvstore_json = json.dumps(kvstore)
    found = {"tensorstore": child("tensorstore", kvstore_json, positions, shape, Warm(kvstore_json, at))}
    checksum = found["tensorstore"]["checksum"]
    warm = Warm(str(copy.path), at)
    for reader in readers:
        found[f"{reader} local copy"] = child(reader, str(copy.path), positions, shape, warm)
        with passed_through(copy.path, work / "floor", copy.blksize) as served:
            found[f"{reader} bare FUSE"] = child(reader, str(served), positions, shape, warm)
        with passed_through(copy.stored, work / "floor", copy.blksize) as served:
            found[f"{reader} {STORED}"] = child(reader, str(served), positions, shape,
                                                 Warm(str(copy.stored), at))
        for name, file in ((reader, "data.tif"), ("memmap of data", "data")):
            if name == "memmap of data" and (reader != readers[0] or not memmap):
                continue
            with Mount(str(VENV_BIN / "zarrfs"), source, work / "mnt", opts) as mount:
                kind = "memmap" if file == "data" else reader
                found[f"{name} zarrfs"] = {**child(kind, str(mount.mp / file), positions, shape,
                                                   None if kind == "memmap" else warm),
                                           **zarrfs_counters(mount.mp)}
    for name, figures in found.items():
        if figures["checksum"] != checksum:
            raise AssertionError(f"{name} read other values than TensorStore")
    log("tiles: " + ", ".join(f"{name} {figures['seconds'] * 1e3:.0f} ms" for name, figures in found.items()))
    return found


def run(args: argparse.Namespace) -> str:
    shape = (8192, parse_size(args.size) // 2 // 8192)
    work = Path(tempfile.mkdtemp(prefix="zarrfs-tiles-", dir="/var/tmp"))
    results: dict[tuple[str, str], list[dict[str, Any]]] = {}
    try:
        for layout in args.layouts.split(","):
            path = build(work, shape, layout == "sharded")
            copy = copies(path, work, layout)
            places = [("local", str(path), "ro", {"driver": "file", "path": str(path)})]
            for place, source, opts, kvstore in places:
                results[(place, layout)] = [
                    one_repeat(source, opts, copy, kvstore, shape,
                               positions_for(shape, args.tiles, seed), work,
                               tuple(args.readers.split(",")), not args.skip_memmap)
                    for seed in range(args.repeat)]
            if not args.skip_s3:
                results[("s3", layout)] = s3_repeats(args, path, copy, shape, work, layout)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return report(results, args)


def copies(path: Path, work: Path, layout: str) -> Copy:
    """Local copies of `data.tif` of the array at `path`, as a default mount and a
    `filters=plugins` mount serve it."""
    found = []
    for opts, name in (("ro", f"{layout}.tif"), ("ro,filters=plugins", f"{layout}.stored.tif")):
        with Mount(str(VENV_BIN / "zarrfs"), path, work / "mnt", opts) as mount:
            shutil.copyfile(mount.mp / "data.tif", work / name)
            blksize = os.stat(mount.mp / "data.tif").st_blksize
        found.append(work / name)
    return Copy(found[0], found[1], blksize)


def s3_repeats(args: argparse.Namespace, path: Path, copy: Copy, shape: tuple[int, int], work: Path,
               layout: str) -> list[dict[str, Any]]:
    mod = s3_server_module()
    with environ(mod.S3_ENV), open(work / "s3.log", "ab") as logfile, s3_server(logfile) as endpoint:
        upload(SimpleNamespace(path=path, name=layout, stored=0), endpoint, layout)  # type: ignore[arg-type]
        kvstore = {"driver": "s3", "bucket": BUCKET, "path": f"{layout}/", "endpoint": endpoint,
                   "aws_region": "us-east-1", "aws_credentials": {"type": "environment"}}
        return [one_repeat(f"s3://{BUCKET}/{layout}", f"ro,endpoint_url={endpoint}", copy,
                           kvstore, shape,
                           positions_for(shape, args.tiles, seed), work,
                           tuple(args.readers.split(",")), not args.skip_memmap)
                for seed in range(args.repeat)]


# Targets: tifffile through data.tif of a default mount (tiles decoded by the mount) at 0.9x of
# the same reader decoding the stored tiles itself, through a bare pyfuse3 passthrough of the
# `filters=plugins` copy (issue 87 item 5: a decoded tile costs its decode, no more); GDAL at
# 0.9x of the local copy itself (issue 38 item 9); as (reader, what it is compared with, ratio).
STORED = "bare FUSE, stored tiles"
TARGETS = {"tifffile": (STORED, 0.9), "gdal": ("local copy", 0.9)}


def report(results: dict[tuple[str, str], list[dict[str, Any]]], args: argparse.Namespace) -> str:
    lines = [f"# Tile reads: {args.tiles} random {TILE}x{TILE} tiles of a uint16 zstd image "
             f"({args.size}), medians of {args.repeat}", "",
             "Targets, on local stores: " + "; ".join(f"{reader} >= {ratio}x of {base}"
                                                      for reader, (base, ratio) in TARGETS.items()), "",
             "| store | layout | reader | TensorStore ms | local copy ms | bare FUSE ms "
             "| bare FUSE, stored tiles ms | zarrfs ms "
             "| zarrfs / local copy | bare FUSE / local copy | zarrfs / bare FUSE | zarrfs / TensorStore "
             "| chunks decoded | MB fetched | target |", "|---" * 15 + "|"]
    for (place, layout), runs in results.items():
        ts_ms = median([r["tensorstore"]["seconds"] * 1e3 for r in runs]) or 0.0
        for reader in (*READERS, "memmap of data"):
            ours = [r[f"{reader} zarrfs"] for r in runs if f"{reader} zarrfs" in r]
            if not ours:
                continue
            mine = median([o["seconds"] * 1e3 for o in ours]) or 0.0
            local, bare, stored = (median([r[f"{reader} {how}"]["seconds"] * 1e3 for r in runs
                                           if f"{reader} {how}" in r])
                                   for how in ("local copy", "bare FUSE", STORED))
            bases = {"local copy": local, "bare FUSE": bare, STORED: stored}
            decoded = median([o["chunks_decoded"] for o in ours])
            fetched = median([o["bytes_fetched"] / 1e6 for o in ours])
            lines.append(f"| {place} | {layout} | {reader} | {ts_ms:.1f} | {_ms(local)} | {_ms(bare)} | "
                         f"{_ms(stored)} | {mine:.1f} | "
                         f"{_ratio(local, mine)} | {_ratio(local, bare)} | {_ratio(bare, mine)} | "
                         f"{ts_ms / mine:.2f}x | {decoded:.0f} | {fetched:.1f} | "
                         f"{_target(place, reader, bases, mine)} |")
    return "\n".join(lines) + "\n"


def _target(place: str, reader: str, bases: dict[str, float | None], mine: float) -> str:
    """Whether `reader` through zarrfs (`mine` ms) meets its target against its base (on a
    local store: the bases are local files)."""
    if place != "local" or reader not in TARGETS or bases[TARGETS[reader][0]] is None or not mine:
        return "-"
    base, ratio = TARGETS[reader]
    found = (bases[base] or 0.0) / mine
    return f"{'met' if found >= ratio else 'MISSED'} ({found:.2f}x of {base})"


def _ms(figure: float | None) -> str:
    return "-" if figure is None else f"{figure:.1f}"


def _ratio(faster: float | None, slower: float | None) -> str:
    return "-" if faster is None or not slower else f"{faster / slower:.2f}x"


def main(doc: str | None) -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--_worker":
        kind, where, positions, shape, warm = sys.argv[3:8]
        warmed = json.loads(warm)
        print(json.dumps(read_tiles(kind, where, json.loads(positions), json.loads(shape),
                                    None if warmed is None else Warm(*warmed))))
        return
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="256M")
    parser.add_argument("--tiles", type=int, default=24)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--skip-s3", action="store_true")
    parser.add_argument("--skip-memmap", action="store_true")
    parser.add_argument("--readers", default=",".join(READERS), help="of: " + ", ".join(READERS))
    parser.add_argument("--layouts", default="plain,sharded")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    text = run(args)
    log(text)
    if args.out:
        args.out.write_text(text)
