"""The disk cache (`-o disk_cache=DIR`): its entries' files (`entries`), the cache shared by
every daemon that names DIR (`cache`), which generation a mount may serve from it
(`freshness`), a mount's reads through it (`reads`), the store adapter they make
(`adapter`), its opening (`opening`) and its mount options (`options`)."""

from .adapter import DiskCachedStore
from .cache import DiskCache
from .opening import open_disk_cache
from .options import DISK_CACHE, DISK_CACHE_SIZE, OPTIONS
from .reads import CachedReads

__all__ = ["DISK_CACHE", "DISK_CACHE_SIZE", "OPTIONS", "CachedReads", "DiskCache", "DiskCachedStore",
           "open_disk_cache"]
