"""Reference sets (kerchunk JSON or Parquet) as read-only stores, each reference confined to
the places its set allows (`targets`)."""

from .filesystem import GuardedReferenceFileSystem, is_reference_source, open_filesystem

__all__ = ["GuardedReferenceFileSystem", "is_reference_source", "open_filesystem"]
