"""The reads room: an array's one source of read chunks, into the cache or lent to streams
(`source`), where each is decoded (`policy`), streams of rows in file order read ahead of a
sequential reader (`streaming`, cut into `jobs`), one open file's reading ahead that schedules
them (`readahead`) and what reading ahead costs in requests and the kernel's window
(`readahead_cost`). It imports the cache, stored and decoding rooms."""

from .readahead import SEQUENTIAL_SLACK, Ahead, Readahead, Reading, Slab, Streaming
from .readahead_cost import (
    FREE_REQUESTS,
    KERNEL_MAX_KB,
    LOCAL_FREE_REQUESTS,
    chunks_in,
    chunks_touched,
    kernel_window_kb,
)
from .source import ChunkSource
from .streaming import Stream, Streams

__all__ = ["FREE_REQUESTS", "KERNEL_MAX_KB", "LOCAL_FREE_REQUESTS", "SEQUENTIAL_SLACK", "Ahead",
           "ChunkSource", "Readahead", "Reading", "Slab", "Stream", "Streaming", "Streams", "chunks_in",
           "chunks_touched", "kernel_window_kb"]
