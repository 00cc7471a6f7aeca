"""Region reads and writes over the chunk grid: the mount-wide cache and workers (`cache`),
plain and sharded chunk I/O (`chunk_io`), write-back (`writeback`) and the array (`core`)."""

from .cache import DEFAULT_CACHE_BYTES, Shared
from .core import ZarrArray

__all__ = ["DEFAULT_CACHE_BYTES", "Shared", "ZarrArray"]
