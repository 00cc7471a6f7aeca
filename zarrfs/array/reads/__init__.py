"""The reads room: loading read chunks into the cache (`loader`), streams of rows in file
order read ahead of a sequential reader (`streaming`) and what reading ahead costs in requests
and the kernel's window (`readahead_cost`). It imports the cache and stored rooms."""

from .loader import ChunkLoader
from .readahead_cost import (
    FREE_REQUESTS,
    KERNEL_MAX_KB,
    LOCAL_FREE_REQUESTS,
    chunks_in,
    chunks_touched,
    kernel_window_kb,
)
from .streaming import Stream, Streams

__all__ = ["FREE_REQUESTS", "KERNEL_MAX_KB", "LOCAL_FREE_REQUESTS", "ChunkLoader", "Stream", "Streams",
           "chunks_in", "chunks_touched", "kernel_window_kb"]
