"""Region reads and writes over the chunk grid: the mount-wide cache and workers (`cache`),
plain and sharded chunk I/O (`chunk_io`), write-back (`writeback`) and the array (`core`)."""

from .cache import DEFAULT_CACHE_BYTES
from .core import ZarrArray
from .shared import Shared

__all__ = ["DEFAULT_CACHE_BYTES", "Shared", "ZarrArray"]
