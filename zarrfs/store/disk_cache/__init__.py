"""The disk cache (`-o disk_cache=DIR`): its entries' files (`entries`), the cache shared by
every daemon that names DIR (`cache`), a mount's reads through it under close-to-open
(`reads`), the store adapter they make (`adapter`), and its opening (`opening`)."""

from .adapter import DiskCachedStore
from .cache import DiskCache
from .opening import open_disk_cache
from .reads import CachedReads

__all__ = ["CachedReads", "DiskCache", "DiskCachedStore", "open_disk_cache"]
