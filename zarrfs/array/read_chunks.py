"""How an array's description says it is read, before any store request: its codec pipeline,
the sharding codec whose inner chunks are read one by one (None: whole chunks), and the unit
read, cached and shown by the chunk views (a chunk, or a shard's inner chunk)."""

from __future__ import annotations

from dataclasses import dataclass

from ..codecs import ChunkSpec, Pipeline
from ..codecs.sharding import ShardingCodec
from ..formats.description import ArrayDescription
from ..grid import Index
from ..rectilinear import RectilinearGrid
from .stored import partial_read_sharding


@dataclass(frozen=True)
class ReadChunks:
    pipeline: Pipeline
    sharding: ShardingCodec | None
    shape: Index  # (the read chunk's)
    # The grid of read chunks when it is not regular (a rectilinear grid's chunks; its shards'
    # inner chunks are regular).
    grid: RectilinearGrid | None

    @classmethod
    def of(cls, description: ArrayDescription) -> ReadChunks:
        pipeline = Pipeline.build(description.codecs, ChunkSpec(
            description.chunk_shape, description.data_type, description.fill_value))
        sharding = partial_read_sharding(pipeline)
        shape = sharding.inner_shape if sharding else description.chunk_shape
        return cls(pipeline, sharding, shape, None if sharding else description.rectilinear)
