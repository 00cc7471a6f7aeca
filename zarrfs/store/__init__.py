"""The store layer: a key/value layer over a backend's driver (`driver`: the contract; one
folder or module per backend family; `sources`: which driver serves a source), the store
itself (`base`, `core`), what one family does as facets (`facets`), and the disk cache that
wraps it (`disk_cache`; `opening`)."""

from .core import ANY, ByteRange, Capabilities, Expect, RetryPolicy, Store, SuffixRange, one_line
from .facets import CachedOnDisk, LocalFiles
from .local import open_below, temporary_owner_alive
from .opening import open_store
from .settings import SourceOptions
from .sources import CLIENT_LOGGERS, LateImports, late_imports
from .values import TEMP_PREFIX, Described, Opened, Versioned, read_opened

__all__ = ["ANY", "CLIENT_LOGGERS", "TEMP_PREFIX", "ByteRange", "CachedOnDisk", "Capabilities",
           "Described", "Expect", "LateImports", "LocalFiles", "Opened", "RetryPolicy", "SourceOptions",
           "Store", "SuffixRange", "Versioned", "late_imports", "one_line", "open_below", "open_store",
           "read_opened", "temporary_owner_alive"]
