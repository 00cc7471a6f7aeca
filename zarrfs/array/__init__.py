"""Region reads and writes over the chunk grid, in rooms each entered through its face (its
`__init__`): the mount-wide chunk cache (`cache`), chunks moved between the store and memory
(`stored`), reads and streams (`reads`), write-back and resizes (`writes`). At the top: the
array (`core`, a facade over them), its grid (`geometry`), what a mount's arrays share
(`shared`, `loader_pool`), rechecks (`recheck`), arrays of variable-size strings (`variable`).
Every layer above enters it here: what they use of its rooms is named below."""

from .cache import DEFAULT_CACHE_BYTES, HeldBytes, KeyedLocks
from .core import ZarrArray
from .decoding import DecodePool, Drop, ForkServer
from .read_chunks import ReadChunks
from .reads import (
    FREE_REQUESTS,
    KERNEL_MAX_KB,
    LOCAL_FREE_REQUESTS,
    SEQUENTIAL_SLACK,
    Ahead,
    Readahead,
    Reading,
    Slab,
    Stream,
    Streaming,
    chunks_in,
    kernel_window_kb,
)
from .shared import Shared
from .stored import partial_read_sharding
from .variable import VariableArray

__all__ = ["DEFAULT_CACHE_BYTES", "FREE_REQUESTS", "KERNEL_MAX_KB", "LOCAL_FREE_REQUESTS", "SEQUENTIAL_SLACK",
           "Ahead", "DecodePool", "Drop", "ForkServer", "HeldBytes", "KeyedLocks", "ReadChunks", "Readahead",
           "Reading", "Shared", "Slab", "Stream", "Streaming", "VariableArray", "ZarrArray", "chunks_in",
           "kernel_window_kb", "partial_read_sharding"]
