"""The benchmark's arrays: their values, their TensorStore specs, and building them."""

from __future__ import annotations

import argparse
import functools
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .common import dir_bytes, fmt_size, log

INNER = 512  # inner chunk edge (elements): 512 KiB for uint16, 1 MiB for float32
BIG_PIECE = 1024  # rows of the block the big array repeats


def shape_for(nbytes: int, itemsize: int) -> tuple[int, int]:
    """A 2-D shape of about `nbytes`: a power-of-two number of columns near the square root."""
    n = max(1, nbytes // itemsize)
    cols = 1 << max(9, round(np.log2(np.sqrt(n))))
    if n // cols >= cols * 2:
        cols *= 2
    rows = max(1, n // cols)
    return rows, cols


def gen_rows(dtype: str, r0: int, r1: int, cols: int, seed: int) -> np.ndarray:
    """Rows [r0, r1) of a smooth field plus ~3.6 bits of noise, quantized: compressible
    (uint16 ~1.4x with zstd-1, ~1.9x with blosc shuffle; float32 ~3x) but not trivially.
    Deterministic for a given (seed, r0, r1)."""
    ph = np.random.default_rng(seed).uniform(0, 2 * np.pi, 4).astype(np.float32)
    i = np.arange(r0, r1, dtype=np.float32)
    j = np.arange(cols, dtype=np.float32)
    a = 3000 * np.sin(i / 211 + ph[0])
    b = 400 * np.cos(j / 337 + ph[1])
    c = np.sin(i / 53 + ph[2])
    d = 150 * np.cos(j / 71 + ph[3])
    f = a[:, None] + b[None, :]
    f += c[:, None] * d[None, :]
    np.round(f, out=f)
    f += np.random.default_rng([seed, r0]).integers(0, 12, size=f.shape, dtype=np.uint8)
    if dtype == "uint16":
        f += 32768
        return f.astype("<u2")
    f /= 64
    return f.astype("<f4")


def gen_array(dtype: str, shape: tuple[int, int], seed: int) -> np.ndarray:
    rows, cols = shape
    out = np.empty(shape, dtype="<u2" if dtype == "uint16" else "<f4")
    step = 1024
    for r in range(0, rows, step):
        out[r : r + step] = gen_rows(dtype, r, min(rows, r + step), cols, seed)
    return out


@functools.cache
def big_base(cols: int) -> np.ndarray:
    """The big array is this block of rows repeated, plus 1 per repetition: generating 2 GiB
    of fresh values would take longer than the measurements made on them."""
    return gen_rows("uint16", 0, BIG_PIECE, cols, seed=3)


def codec_json(codec: str, itemsize: int) -> dict[str, Any]:
    if codec == "zstd":
        return {"name": "zstd", "configuration": {"level": 1, "checksum": False}}
    if codec == "blosc":
        return {
            "name": "blosc",
            "configuration": {
                "cname": "lz4",
                "clevel": 5,
                "shuffle": "shuffle",
                "typesize": itemsize,
                "blocksize": 0,
            },
        }
    raise ValueError(codec)


def ts_create_spec(
    path: Path,
    dtype: str,
    shape: tuple[int, ...],
    chunks: tuple[int, ...],
    shards: tuple[int, ...] | None,
    codec: str,
) -> dict[str, Any]:
    itemsize = np.dtype(dtype).itemsize
    inner = [{"name": "bytes", "configuration": {"endian": "little"}}, codec_json(codec, itemsize)]
    if shards:
        codecs = [
            {
                "name": "sharding_indexed",
                "configuration": {
                    "chunk_shape": list(chunks),
                    "codecs": inner,
                    "index_codecs": [
                        {"name": "bytes", "configuration": {"endian": "little"}},
                        {"name": "crc32c"},
                    ],
                    "index_location": "end",
                },
            }
        ]
        grid = shards
    else:
        codecs, grid = inner, chunks
    return {
        "driver": "zarr3",
        "kvstore": {"driver": "file", "path": str(path)},
        "metadata": {
            "shape": list(shape),
            "data_type": dtype,
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(grid)}},
            "chunk_key_encoding": {"name": "default"},
            "codecs": codecs,
            "fill_value": 0,
        },
    }


def ts_context() -> Any:
    """A TensorStore context without a cache pool: every read goes to the store."""
    import tensorstore as ts

    return ts.Context({"cache_pool": {"total_bytes_limit": 0}})


def ts_open(where: Path | dict[str, Any], write: bool = False) -> Any:
    """Open a zarr3 array with TensorStore: a local directory, or a kvstore spec."""
    import tensorstore as ts

    kvstore = where if isinstance(where, dict) else {"driver": "file", "path": str(where)}
    spec = {"driver": "zarr3", "kvstore": kvstore}
    return ts.open(spec, open=True, read=True, write=write, context=ts_context()).result()


@dataclass
class Config:
    dtype: str
    codec: str
    sharded: bool
    shape: tuple[int, int]
    chunks: tuple[int, int]
    shards: tuple[int, int] | None
    path: Path
    raw: Path  # the array's bytes on /dev/shm
    raw2: Path  # other values of the same shape (for the write test)
    nbytes: int = 0
    stored: int = 0

    @property
    def name(self) -> str:
        return f"{self.dtype}/{self.codec}/{'sharded' if self.sharded else 'plain'}"

    @property
    def slug(self) -> str:
        return self.name.replace("/", "-")


def build_configs(args: argparse.Namespace, work: Path, shm: Path) -> list[Config]:
    """The arrays of --size bytes, uint16 and float32 x --codecs x --layouts, written by
    TensorStore under `work`; their raw values (and other values, for the writes) on `shm`."""
    import tensorstore as ts

    configs = []
    for dtype in ("uint16", "float32"):
        shape = shape_for(args.size, np.dtype(dtype).itemsize)
        t0 = time.perf_counter()
        data = gen_array(dtype, shape, seed=1)
        raw = shm / f"{dtype}.raw"
        data.tofile(raw)
        raw2 = shm / f"{dtype}-2.raw"
        gen_array(dtype, shape, seed=2).tofile(raw2)
        log(f"generated {dtype} {shape} in {time.perf_counter() - t0:.1f} s")
        for codec in args.codecs:
            for sharded in (False, True):
                if args.layouts not in ("both", "sharded" if sharded else "plain"):
                    continue
                shards = None
                if sharded:
                    up = [(-(-d // INNER)) * INNER for d in shape]
                    shards = (min(8 * INNER, up[0]), min(8 * INNER, up[1]))
                layout = "sharded" if sharded else "plain"
                path = work / f"{dtype}-{codec}-{layout}"
                cfg = Config(dtype, codec, sharded, shape, (INNER, INNER), shards, path, raw, raw2)
                t0 = time.perf_counter()
                spec = ts_create_spec(cfg.path, dtype, shape, cfg.chunks, shards, codec)
                ts.open(spec, create=True, context=ts_context()).result().write(data).result()
                cfg.nbytes = data.nbytes
                cfg.stored = dir_bytes(cfg.path)
                log(
                    f"built {cfg.name}: {fmt_size(cfg.nbytes)} -> {fmt_size(cfg.stored)} "
                    f"in {time.perf_counter() - t0:.1f} s"
                )
                configs.append(cfg)
        del data
    return configs


def build_big(args: argparse.Namespace, work: Path) -> Config:
    """The --big array (uint16, zstd-1), sharded with shards of --shard-size (<= half the
    array): for the memory and the sharding measurements. Written shard row by shard row so
    the generator never holds more than one row of shards."""
    import tensorstore as ts

    shape = shape_for(args.big, 2)
    rows, cols = shape
    # 1 MiB inner chunks whose rows are 4 KiB, so one page of `data` lies in one chunk.
    chunks = (256, 2048)
    shard_rows = max(chunks[0], min(rows, args.shard_size // (cols * 2)) // chunks[0] * chunks[0])
    shards = (shard_rows, (-(-cols // chunks[1])) * chunks[1])
    path = work / "big-uint16-zstd-sharded"
    cfg = Config("uint16", "zstd", True, shape, chunks, shards, path, Path(), Path())
    t0 = time.perf_counter()
    arr = ts.open(
        ts_create_spec(path, "uint16", shape, cfg.chunks, shards, "zstd"),
        create=True,
        context=ts_context(),
    ).result()
    slab = np.empty((shard_rows, cols), dtype="<u2")
    base = big_base(cols)
    for r in range(0, rows, shard_rows):
        n = min(shard_rows, rows - r)
        for q in range(0, n, BIG_PIECE):
            m = min(BIG_PIECE, n - q)
            np.add(base[:m], (r + q) // BIG_PIECE, out=slab[q : q + m])
        arr[r : r + n].write(slab[:n]).result()
    del slab
    cfg.nbytes = rows * cols * 2
    cfg.stored = dir_bytes(path)
    log(
        f"built big {shape} shards {shards}: {fmt_size(cfg.nbytes)} -> "
        f"{fmt_size(cfg.stored)} in {time.perf_counter() - t0:.1f} s"
    )
    return cfg
