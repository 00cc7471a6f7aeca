"""The cache room: the chunk cache every array of a mount shares, bounded in bytes, with its
shard-index cache, per-chunk locks and the mount's counters (`cache`); each array's part of
it, which decides what goes in (`entries`), and what it hands its callers (`records`); which
elements of a cached chunk were written (`masks`); a write's values split by chunk and copied
in (`pieces`); bytes held against the cache's budget (`held_bytes`). It imports no other room."""

from .cache import (
    DEFAULT_CACHE_BYTES,
    HEAP,
    CacheEntry,
    ChunkCache,
    Counters,
    Fetched,
    KeyedLocks,
    SlabMemory,
)
from .entries import ArrayCache
from .held_bytes import HeldBytes
from .pieces import by_piece
from .records import FetchStart, WriteSnapshot

__all__ = ["DEFAULT_CACHE_BYTES", "HEAP", "ArrayCache", "CacheEntry", "ChunkCache", "Counters", "FetchStart",
           "Fetched", "HeldBytes", "KeyedLocks", "SlabMemory", "WriteSnapshot", "by_piece"]
