"""The chunks of a rectilinear grid (zarrfs.rectilinear) between the store and memory. Each
chunk has its own shape, encoded and decoded through the array's codecs built for that shape
(built once per shape); in memory it sits in the corner of a buffer of the grid's largest
edges, the rest of which is overhang holding the fill value, as the overhang of an edge chunk
of a regular grid does (zarrfs.array.geometry), so the cache and write-back stay the same.
Sharded, the shards differ in shape and the inner chunks do not (`RectilinearShardedIO`)."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any

import numpy as np

from ...codecs import BytesLike, ChunkSpec, Pipeline, ShardingCodec
from ...errors import MetadataError
from ...formats.description import ArrayDescription
from ...grid import Index
from ...rectilinear import RectilinearGrid
from ...store import Store
from ..cache import ChunkCache, Counters
from .chunk_io import PlainChunkIO, Stats
from .sharded_io import ShardedChunkIO


class RectilinearChunkIO(PlainChunkIO):
    def __init__(self, store: Store, pipeline: Pipeline, description: Callable[[], ArrayDescription],
                 stats: Stats, counters: Counters, *, keep_fill: bool = False) -> None:
        """`description`: the array's now (a resize may add an edge)."""
        super().__init__(store, pipeline, description().fill_value, stats, counters, keep_fill=keep_fill)
        self.description = description
        self.decoder = None  # (a codec pipeline a shape: decoded here)
        self._pipelines: dict[Index, Pipeline] = {pipeline.chunk.shape: pipeline}
        self._built = threading.Lock()

    def pipeline_for(self, chunk: Index) -> Pipeline:
        description = self.description()
        assert description.rectilinear is not None
        shape = description.rectilinear.chunk_shape(chunk)
        found = self._pipelines.get(shape)
        if found is None:
            with self._built:
                found = self._pipelines.get(shape)
                if found is None:
                    spec = ChunkSpec(shape, description.data_type, self.fill_value)
                    found = self._pipelines[shape] = Pipeline.build(description.codecs, spec)
        return found

    def decode_chunk(self, chunk: Index, data: BytesLike) -> np.ndarray:
        pipeline = self.pipeline_for(chunk)
        decoded = self.timed_decode(pipeline.decode, data)
        padded = self.pipeline.chunk.fill_array()
        padded[tuple(slice(0, n) for n in decoded.shape)] = decoded
        return padded

    def encode_chunk(self, chunk: Index, data: np.ndarray) -> BytesLike:
        pipeline = self.pipeline_for(chunk)
        corner = np.ascontiguousarray(data[tuple(slice(0, n) for n in pipeline.chunk.shape)])
        return self.timed_encode(pipeline.encode, corner)


class RectilinearShardedIO(ShardedChunkIO):
    """Shards on a rectilinear grid: each its own shape (its own index size), the inner chunks
    regular across the whole array, since every edge is a multiple of the inner chunk shape
    (as zarr-python requires)."""

    def __init__(self, description: Callable[[], ArrayDescription], *args: Any, **kwargs: Any) -> None:
        self.description = description
        self._codecs: dict[Index, ShardingCodec] = {}
        self._built = threading.Lock()
        super().__init__(*args, **kwargs)
        self.decoder = None  # (shards of many shapes: decoded here)

    def _grid(self) -> RectilinearGrid:
        grid = self.description().rectilinear
        assert grid is not None
        return grid

    def sharding_of(self, chunk: Index) -> ShardingCodec:
        shape = self._grid().chunk_shape(chunk)
        found = self._codecs.get(shape)
        if found is None:
            with self._built:
                description = self.description()
                spec = ChunkSpec(shape, description.data_type, self.fill_value)
                codec = Pipeline.build(description.codecs, spec).array_to_bytes
                assert isinstance(codec, ShardingCodec)
                found = self._codecs[shape] = codec
        return found

    def location(self, unit: Index) -> tuple[Index, Index | None]:
        grid, inner = self._grid(), self.sharding.inner_shape
        chunk = tuple(grid.index_of(d, u * c) for d, (u, c) in enumerate(zip(unit, inner, strict=True)))
        return chunk, tuple(u - grid.start(d, i) // c
                            for d, (u, i, c) in enumerate(zip(unit, chunk, inner, strict=True)))

    def units_of(self, chunk: Index) -> list[Index]:
        box = self._grid().chunk_box(chunk)
        inner = self.sharding.inner_shape
        ranges = [range(a // c, b // c) for a, b, c in zip(box.start, box.stop, inner, strict=True)]
        return list(itertools.product(*ranges))


def rectilinear_io(store: Store, pipeline: Pipeline, description: Callable[[], ArrayDescription],
                   sharding: ShardingCodec | None, stats: Stats, counters: Counters,
                   shards: tuple[ChunkCache, int, Executor], *, keep_fill: bool = False) -> PlainChunkIO:
    """The chunk I/O of an array on a rectilinear grid (`pipeline`: its codecs built for the
    largest edges, which checked them; `shards`: the cache, owner and encoders of sharded
    chunk I/O)."""
    if sharding is None:
        return RectilinearChunkIO(store, pipeline, description, stats, counters, keep_fill=keep_fill)
    grid = description().rectilinear
    assert grid is not None
    axis = grid.divisible_by(sharding.inner_shape)
    if axis is not None:
        raise MetadataError(f"chunk_grid.configuration.chunk_shapes[{axis}]",
                            f"an edge is not a multiple of the inner chunks {list(sharding.inner_shape)}")
    cache, owner, encoders = shards
    return RectilinearShardedIO(description, store, pipeline, sharding, cache, owner, stats, counters,
                                encoders, keep_fill=keep_fill)
