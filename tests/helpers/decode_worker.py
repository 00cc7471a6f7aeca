"""Decode corpus chunks in a child process, one JSON line per step, under a memory limit.

``python -m tests.helpers.decode_worker CORPUS_DIR [codec|array] < items.json``, where
items.json is a list of ``[case, key]`` pairs (case like ``chunks/zstd_bomb_header``). For each
item it prints ``{"begin": [case, key]}``, decodes the chunk, then prints the result. A decoder
that crashes the process (a segfault in a C library) therefore leaves its item begun but not
ended, and the parent names it and starts a new worker for the rest.

The address space is limited (``RLIMIT_AS``) to what the process uses after its imports plus
``HEADROOM`` bytes, and each decode's Python-visible allocations are measured with tracemalloc,
so a decompression bomb shows as a MemoryError or a large "peak" rather than an exhausted
machine. Run it with MALLOC_ARENA_MAX=2, or every thread reserves a 64 MiB malloc arena of
address space and the limit is reached by threads rather than by data.

Two levels:

* ``codec``: parse zarr.json, build the codec pipeline for one chunk and decode the chunk file.
* ``array``: open the case with ``ZarrArray`` over a read-only local store and read the box of
  one chunk (key "" reads the whole array). One array per case serves all its items.
"""

from __future__ import annotations

import faulthandler
import json
import logging
import math
import resource
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np

from zarrfs.codecs import ChunkSpec, Pipeline
from zarrfs.errors import ChunkError, ZarrfsError
from zarrfs.formats import ArrayDescription as ArrayMetadata
from zarrfs.formats.v3 import parse_metadata

HEADROOM = 1 << 30


def expected_values(meta: ArrayMetadata) -> np.ndarray:
    flat = np.arange(math.prod(meta.shape))
    if meta.data_type.name == "bool":
        return (flat % 2).astype(bool).reshape(meta.shape)
    return flat.astype(meta.data_type.storage).reshape(meta.shape)


def chunk_region(meta: ArrayMetadata, key: str) -> tuple[slice, ...]:
    index = meta.chunk_key_encoding.parse(key, meta.rank)
    assert index is not None, key
    return tuple(
        slice(i * c, min((i + 1) * c, s))
        for i, c, s in zip(index, meta.chunk_shape, meta.shape, strict=True)
    )


def expected_chunk(meta: ArrayMetadata, key: str) -> np.ndarray:
    fill = np.frombuffer(meta.fill_value, dtype=meta.data_type.storage)[0]
    out = np.full(meta.chunk_shape, fill, dtype=meta.data_type.storage)
    part = expected_values(meta)[chunk_region(meta, key)]
    out[tuple(slice(0, n) for n in part.shape)] = part
    return out


def outcome(error: BaseException) -> str:
    return type(error).__name__


def decode_codec(case_dir: Path, key: str) -> dict[str, Any]:
    meta = parse_metadata((case_dir / "zarr.json").read_bytes())
    spec = ChunkSpec(meta.chunk_shape, meta.data_type, meta.fill_value)
    pipeline = Pipeline.build(meta.codecs, spec)
    data = (case_dir / key).read_bytes()
    tracemalloc.start()
    try:
        decoded = pipeline.decode(data)
        result: dict[str, Any] = {"outcome": "ok"}
        result["match"] = bool(
            decoded.shape == spec.shape and np.array_equal(decoded, expected_chunk(meta, key))
        )
    except MemoryError as e:
        result = {"outcome": "MemoryError", "message": str(e)}
    except Exception as e:
        result = {"outcome": outcome(e), "message": str(e)}
    finally:
        result["peak"] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return result


class ArrayLevel:
    """Reads through `ZarrArray`, one array per case kept open across its items, so a
    good chunk read after a bad one shows the array still works."""

    def __init__(self) -> None:
        self.arrays: dict[Path, Any] = {}

    def __call__(self, case_dir: Path, key: str) -> dict[str, Any]:
        from fsspec.implementations.local import LocalFileSystem

        from zarrfs.array_metadata import open_array
        from zarrfs.grid import Box
        from zarrfs.store import Store

        array = self.arrays.get(case_dir)
        if array is None:
            self.close()  # items come case by case; keep one array's threads alive at a time
            store = Store(LocalFileSystem(), str(case_dir), read_only=True)
            array = self.arrays[case_dir] = open_array(store, threads=2)
        meta = array.metadata
        region = chunk_region(meta, key) if key else tuple(slice(0, s) for s in meta.shape)
        box = Box(tuple(r.start for r in region), tuple(r.stop for r in region))
        tracemalloc.start()
        try:
            got = np.array(array.read(box))
            want = expected_values(meta)[region]
            result: dict[str, Any] = {"outcome": "ok", "match": bool(np.array_equal(got, want))}
        except ChunkError as e:
            result = {"outcome": "ChunkError", "key": e.key, "message": str(e)}
        except MemoryError as e:
            result = {"outcome": "MemoryError", "message": str(e)}
        except Exception as e:
            result = {
                "outcome": outcome(e),
                "message": str(e),
                "zarrfs_error": isinstance(e, ZarrfsError),
            }
        finally:
            result["peak"] = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        return result

    def close(self) -> None:
        for array in self.arrays.values():
            array.close()
        self.arrays.clear()


def main() -> None:
    corpus = Path(sys.argv[1])
    level = sys.argv[2] if len(sys.argv) > 2 else "codec"
    items = json.load(sys.stdin)
    faulthandler.enable()  # a crash in a C decoder prints where it happened
    logging.disable(logging.CRITICAL)  # zarrfs logs each corrupt chunk; the results say it
    used = _address_space_in_use()
    resource.setrlimit(resource.RLIMIT_AS, (used + HEADROOM, resource.RLIM_INFINITY))
    run = decode_codec if level == "codec" else ArrayLevel()
    for case, key in items:
        print(json.dumps({"begin": [case, key]}), flush=True)
        try:
            result = run(corpus / case, key)
        except MemoryError as e:
            result = {"outcome": "MemoryError", "message": str(e), "peak": -1}
        except Exception as e:  # opening failed: report it, the parent decides
            result = {"outcome": outcome(e), "message": str(e), "peak": -1, "phase": "open"}
        print(json.dumps({"end": [case, key], **result}), flush=True)
    if isinstance(run, ArrayLevel):
        run.close()


def _address_space_in_use() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize in /proc/self/status")


if __name__ == "__main__":
    main()
