"""Reference sets (kerchunk JSON or Parquet) as read-only stores, each reference confined to
the places its set allows (`store.targets`, the rule the drivers share)."""

from .driver import ReferencesDriver
from .filesystem import GuardedReferenceFileSystem, is_reference_source, open_filesystem
from .options import FO, OPTIONS

__all__ = ["FO", "OPTIONS", "GuardedReferenceFileSystem", "ReferencesDriver",
           "is_reference_source", "open_filesystem"]
