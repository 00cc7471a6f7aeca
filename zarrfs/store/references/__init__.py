"""Reference sets (kerchunk JSON or Parquet) as read-only stores, each reference confined to
the places its set allows (`store.targets`, the rule the drivers share)."""

from .driver import ReferencesDriver
from .filesystem import GuardedReferenceFileSystem, is_reference_source, open_filesystem

__all__ = ["GuardedReferenceFileSystem", "ReferencesDriver", "is_reference_source", "open_filesystem"]
