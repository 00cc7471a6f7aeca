"""The disk cache (`-o disk_cache=DIR`): its entries' files (`entries`), the cache shared by
every daemon that names DIR (`cache`), which generation a mount may serve from it
(`freshness`), a mount's reads through it (`reads`), the store adapter they make
(`adapter`), and its opening (`opening`)."""

from .adapter import DiskCachedStore
from .cache import DiskCache
from .opening import open_disk_cache
from .reads import CachedReads

__all__ = ["CachedReads", "DiskCache", "DiskCachedStore", "open_disk_cache"]
