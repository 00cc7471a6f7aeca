"""Reference sets (kerchunk JSON or Parquet) as read-only stores, each reference confined to
the places its set allows (`targets`; the same rule confines an Icechunk repository's
virtual chunk containers)."""

from .driver import ReferencesDriver
from .filesystem import GuardedReferenceFileSystem, is_reference_source, open_filesystem
from .options import FO, OPTIONS, REFERENCES_ALLOW
from .targets import Place, TargetPolicy, Where

__all__ = [
           "FO",
           "OPTIONS",
           "REFERENCES_ALLOW",
           "GuardedReferenceFileSystem",
           "Place",
           "ReferencesDriver",
           "TargetPolicy",
           "Where",
           "is_reference_source",
           "open_filesystem",
]
