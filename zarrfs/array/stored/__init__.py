"""The stored room: moving chunks between the store and memory. One plain chunk whole
(`chunk_io`), the inner chunks of a sharded array through their shard (`sharded_io`, reading
shards and their indexes in `shard_reads`), chunks of rectilinear grids (`rectilinear_io`), and
which rows of a grid hold stored objects (`stored_rows`). It imports the cache room."""

from .chunk_io import Encoded, EncodeWith, PlainChunkIO, Stats, StoredChunk, StoredShard, encoded_here
from .rectilinear_io import rectilinear_io
from .shard_reads import index_cost
from .sharded_io import ShardedChunkIO, partial_read_sharding
from .stored_rows import StoredRows, in_rows, rows_directory, stored_rows

__all__ = [
           "EncodeWith",
           "Encoded",
           "PlainChunkIO",
           "ShardedChunkIO",
           "Stats",
           "StoredChunk",
           "StoredRows",
           "StoredShard",
           "encoded_here",
           "in_rows",
           "index_cost",
           "partial_read_sharding",
           "rectilinear_io",
           "rows_directory",
           "stored_rows",
]
