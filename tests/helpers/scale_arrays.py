"""Arrays of many chunks, made fast, and the store requests an access costs (the daemon's
request log, ZARRFS_REQUEST_LOG): what the real-scale tests count and benchmarks/ times.

A twin is a zarr v3 array of uint8 in 16 x 16 chunks (zstd; zlib: `compression`), written
chunk file by chunk file as zarr-python would write it (its chunk key encoding "/"). Element
values follow from their indices (`values`), so any region read can be checked without
reading the whole array.
"""

from __future__ import annotations

import json
import math
import os
import time
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import zstandard

REQUEST_LOG_VARIABLE = "ZARRFS_REQUEST_LOG"  # (zarrfs.store.observe: read by the daemon)


class Compression(NamedTuple):
    """A twin's bytes-to-bytes codec: its v3 metadata, and how it compresses a chunk."""

    codec: dict[str, Any]
    compress: Callable[[bytes], bytes]


ZSTD = Compression({"name": "zstd", "configuration": {"level": 1, "checksum": False}},
                   zstandard.ZstdCompressor(level=1).compress)
# (as zarr.codecs.numcodecs.Zlib writes it: a zlib stream, which HDF5 1.8 decodes itself)
ZLIB = Compression({"name": "numcodecs.zlib", "configuration": {"level": 1}},
                   lambda data: zlib.compress(data, 1))


def values(start: Sequence[int], stop: Sequence[int]) -> np.ndarray:
    """The elements [start, stop) of every twin: the row index times 7 plus the column
    index, modulo 251 (a prime: no chunk repeats its neighbour)."""
    rows = np.arange(start[0], stop[0], dtype=np.int64)[:, None]
    columns = np.arange(start[1], stop[1], dtype=np.int64)[None, :]
    return ((rows * 7 + columns) % 251).astype(np.uint8)


def twin_on_s3(server: Any, directory: Path, grid: tuple[int, int], chunk: tuple[int, int], *,
               name: str = "twin.zarr", stored: Iterable[tuple[int, int]] | None = None,
               shape: tuple[int, int] | None = None, compression: Compression = ZSTD) -> str:
    """`write_twin` made in `directory`, then put in the S3 server's bucket (a
    `tests.helpers.s3_server.S3Server` or `slow_s3.SlowS3`: its `uploading_options`) as
    `name`; its URL."""
    import fsspec

    local = write_twin(directory / name, grid, chunk, stored=stored, shape=shape, compression=compression)
    fs = fsspec.filesystem("s3", **server.uploading_options())
    fs.put(str(local), f"{server.bucket}/{name}", recursive=True)
    return f"s3://{server.bucket}/{name}"


def write_twin(path: Path, grid: tuple[int, int], chunk: tuple[int, int] = (16, 16), *,
               stored: Iterable[tuple[int, int]] | None = None, shape: tuple[int, int] | None = None,
               compression: Compression = ZSTD) -> Path:
    """A 2-D uint8 array of `grid` chunks (fill 0) at `path`; `stored`: the chunks written
    (default: all). `shape` may leave the last chunks partial."""
    shape = shape or (grid[0] * chunk[0], grid[1] * chunk[1])
    path.mkdir(parents=True)
    metadata = {
        "zarr_format": 3, "node_type": "array", "shape": list(shape), "data_type": "uint8",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunk)}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0,
        "codecs": [{"name": "bytes"}, compression.codec],
        "attributes": {}, "dimension_names": ["y", "x"],
    }
    (path / "zarr.json").write_text(json.dumps(metadata, indent=2))
    made: set[str] = set()
    chunks = stored if stored is not None else np.ndindex(*grid)
    for i, j in chunks:
        start = (i * chunk[0], j * chunk[1])
        block = np.zeros(chunk, np.uint8)
        stop = (min(start[0] + chunk[0], shape[0]), min(start[1] + chunk[1], shape[1]))
        block[: stop[0] - start[0], : stop[1] - start[1]] = values(start, stop)
        directory = path / "c" / str(i)
        if str(i) not in made:
            directory.mkdir(parents=True, exist_ok=True)
            made.add(str(i))
        (directory / str(j)).write_bytes(compression.compress(block.tobytes()))
    return path


def chunks_touched(shape: tuple[int, int], chunk: tuple[int, int], offset: int, size: int) -> int:
    """How many chunks bytes [offset, offset + size) of the flat C-order uint8 file touch."""
    first_row, last_row = offset // shape[1], (offset + size - 1) // shape[1]
    if first_row == last_row:
        columns = (offset % shape[1]) // chunk[1], ((offset + size - 1) % shape[1]) // chunk[1]
        return columns[1] - columns[0] + 1
    grid_columns = math.ceil(shape[1] / chunk[1])
    return (last_row // chunk[0] - first_row // chunk[0] + 1) * grid_columns


@dataclass(frozen=True)
class Request:
    kind: str  # zarrfs.store.observe's kinds: get, get_range, list, stat, put, delete, ...
    outcome: str  # ok, missing, error, timeout
    objects: int  # objects it covered: a batch's, or the entries a listing returned
    key: str  # the path it named

    @property
    def is_read(self) -> bool:
        return self.kind in ("get", "get_range")


class Requests(list[Request]):
    """The store requests of an access."""

    def count(self, *kinds: str) -> int:  # type: ignore[override]
        """Objects asked for by requests of these kinds (all kinds: none named)."""
        return sum(r.objects for r in self if not kinds or r.kind in kinds)

    def of_kind(self, *kinds: str) -> Requests:
        """The requests of these kinds."""
        return Requests(r for r in self if r.kind in kinds)

    def listed(self) -> int:
        """Entries all listings returned."""
        return self.count("list")

    def read(self) -> int:
        """Objects (or byte ranges) read."""
        return self.count("get", "get_range")

    def summary(self) -> str:
        by_kind: dict[str, int] = {}
        for r in self:
            by_kind[r.kind] = by_kind.get(r.kind, 0) + r.objects
        return ", ".join(f"{kind} {n}" for kind, n in sorted(by_kind.items())) or "none"


class RequestLog:
    """The daemon's request log, read access by access: `take()` gives the requests made
    since the last `take()`, once the daemon has been quiet a moment (what an access starts
    in the background, such as reading ahead, counts as its cost)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0

    @property
    def env(self) -> dict[str, str]:
        """The environment that makes a daemon write this log."""
        return {REQUEST_LOG_VARIABLE: str(self.path)}

    def take(self, quiet: float = 0.3, patience: float = 30.0) -> Requests:
        deadline = time.monotonic() + patience
        size, since = self._size(), time.monotonic()
        while time.monotonic() - since < quiet and time.monotonic() < deadline:
            time.sleep(0.05)
            if (now := self._size()) != size:
                size, since = now, time.monotonic()
        with open(self.path, encoding="utf-8") as log:
            log.seek(self.offset)
            text = log.read()
        complete = text[: text.rfind("\n") + 1]  # (a line being written is the next access's)
        self.offset += len(complete.encode())
        found = Requests()
        for line in complete.splitlines():
            kind, outcome, objects, key = line.split("\t", 3)
            found.append(Request(kind, outcome, int(objects), key))
        return found

    def _size(self) -> int:
        try:
            return os.path.getsize(self.path)
        except FileNotFoundError:
            return 0
