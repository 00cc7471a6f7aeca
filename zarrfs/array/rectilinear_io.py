"""The chunks of a rectilinear grid (zarrfs.rectilinear) between the store and memory. Each
chunk has its own shape, encoded and decoded through the array's codecs built for that shape
(built once per shape); in memory it sits in the corner of a buffer of the grid's largest
edges, the rest of which is overhang holding the fill value, as the overhang of an edge chunk
of a regular grid does (zarrfs.array.geometry), so the cache and write-back stay the same."""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np

from ..codecs import BytesLike, ChunkSpec, Pipeline, ShardingCodec
from ..errors import MetadataError
from ..formats.description import ArrayDescription
from ..grid import Index
from ..store import Store
from .cache import Counters
from .chunk_io import PlainChunkIO, Stats


class RectilinearChunkIO(PlainChunkIO):
    def __init__(self, store: Store, pipeline: Pipeline, description: Callable[[], ArrayDescription],
                 stats: Stats, counters: Counters) -> None:
        """`description`: the array's now (a resize may add an edge)."""
        super().__init__(store, pipeline, description().fill_value, stats, counters)
        self.description = description
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


def rectilinear_io(store: Store, pipeline: Pipeline, description: Callable[[], ArrayDescription],
                   sharding: ShardingCodec | None, stats: Stats, counters: Counters) -> RectilinearChunkIO:
    """The chunk I/O of an array on a rectilinear grid (`pipeline`: its codecs built for the
    largest edges, which checked them)."""
    if sharding is not None:
        raise MetadataError("codecs", "sharding inside a rectilinear chunk grid is not supported yet")
    return RectilinearChunkIO(store, pipeline, description, stats, counters)
