"""An interop case (interop_cases.py) and what is computed of it without zarrfs: the model of its
contents, the chunk keys it stores, and its shard indexes, decoded independently."""

from __future__ import annotations

import itertools
import math
import os
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import google_crc32c
import numpy as np

from tests.helpers.interop_docs import chunk_key
from tests.helpers.interop_values import bits, element, random_values


@dataclass(frozen=True)
class Case:
    id: str
    doc: dict[str, Any]
    tensorstore: bool = True  # TensorStore accepts this metadata
    zarr_python: bool = True  # zarr-python accepts it (and the data type)
    # A value equal to the fill value but not bit for bit (-0.0 for 0.0, another NaN): one
    # whole read chunk is set to it, and it must be stored, not dropped.
    lookalike: Any = None

    @property
    def data_type(self) -> str:
        return str(self.doc["data_type"])

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.doc["shape"])

    @property
    def chunk_shape(self) -> tuple[int, ...]:
        return tuple(self.doc["chunk_grid"]["configuration"]["chunk_shape"])

    @property
    def fill(self) -> np.ndarray:
        return element(self.doc["fill_value"], self.data_type)

    @property
    def shard_config(self) -> dict[str, Any] | None:
        """The sharding configuration when sharding is the only codec (shards read by index)."""
        first = self.doc["codecs"][0]
        if first["name"] != "sharding_indexed" or len(self.doc["codecs"]) > 1:
            return None
        return dict(first["configuration"])

    @property
    def read_chunk_shape(self) -> tuple[int, ...]:
        config = self.shard_config
        return tuple(config["chunk_shape"]) if config else self.chunk_shape

    def grid(self, cell: Sequence[int]) -> list[tuple[int, ...]]:
        counts = [-(-s // c) for s, c in zip(self.shape, cell, strict=True)]
        return list(itertools.product(*(range(n) for n in counts)))


def _cell_slices(index: Sequence[int], cell: Sequence[int]) -> tuple[slice, ...]:
    return tuple(slice(i * c, (i + 1) * c) for i, c in zip(index, cell, strict=True))


def model(case: Case) -> np.ndarray:
    """The contents every writer writes: random, with holes that must not be stored."""
    rng = np.random.default_rng(zlib.crc32(case.id.encode()))
    data = random_values(case.data_type, case.shape, rng)
    if data.size == 0:
        return data
    fill = case.fill[0]
    chunks = case.grid(case.chunk_shape)
    if len(chunks) > 1:
        data[_cell_slices(chunks[0], case.chunk_shape)] = fill  # a missing chunk or shard
    if case.shard_config is not None and len(chunks) > 1:
        # A missing inner chunk in the last shard.
        last = _cell_slices(chunks[-1], case.chunk_shape)
        start = tuple(s.start for s in last)
        data[tuple(slice(a, a + c) for a, c in zip(start, case.read_chunk_shape, strict=True))] = (
            fill
        )
    if case.lookalike is not None:
        cells = case.grid(case.read_chunk_shape)
        data[_cell_slices(cells[len(cells) // 2], case.read_chunk_shape)] = element(
            case.lookalike, case.data_type
        )[0]
    if len(chunks) == 1 and data.size > 1 and case.shard_config is None and not case.lookalike:
        data.reshape(-1)[0] = fill  # some elements equal to the fill value
    return data


def expected_keys(case: Case, data: np.ndarray) -> set[str]:
    """The chunk (or shard) keys a writer that skips all-fill chunks must store."""
    fill = bits(case.fill)
    keys = set()
    for index in case.grid(case.chunk_shape):
        region = data[_cell_slices(index, case.chunk_shape)]
        if region.size and not (bits(region).reshape(-1, fill.size) == fill).all():
            keys.add(chunk_key(case.doc, index))
    return keys


def stored_keys(path: str) -> set[str]:
    found = set()
    for directory, _, files in os.walk(path):
        for name in files:
            key = os.path.relpath(os.path.join(directory, name), path).replace(os.sep, "/")
            if key != "zarr.json" and not name.startswith("."):
                found.add(key)
    return found


# -- shard indexes, decoded independently ----------------------------------------------------

EMPTY = (1 << 64) - 1


def shard_index(case: Case, shard: bytes) -> np.ndarray:
    """The (offset, nbytes) entries of a shard, checking the index's crc32c when present."""
    config = case.shard_config
    assert config is not None
    per_shard = [s // c for s, c in zip(case.chunk_shape, config["chunk_shape"], strict=True)]
    codecs = config["index_codecs"]
    endian = codecs[0].get("configuration", {}).get("endian", "little")
    has_crc = any(c["name"] == "crc32c" for c in codecs[1:])
    size = math.prod(per_shard) * 16 + (4 if has_crc else 0)
    raw = shard[:size] if config.get("index_location", "end") == "start" else shard[-size:]
    if has_crc:
        body, checksum = raw[:-4], raw[-4:]
        assert google_crc32c.value(body) == int.from_bytes(checksum, "little"), "index crc32c mismatch"
        raw = body
    dtype = np.dtype("<u8" if endian == "little" else ">u8")
    return np.frombuffer(raw, dtype=dtype).astype(np.uint64).reshape((*per_shard, 2))


def inner_chunk_bytes(case: Case, shard: bytes) -> dict[tuple[int, ...], bytes]:
    entries = shard_index(case, shard)
    found = {}
    for inner in np.ndindex(*entries.shape[:-1]):
        offset, nbytes = (int(v) for v in entries[inner])
        if offset != EMPTY:
            found[inner] = shard[offset : offset + nbytes]
    return found
