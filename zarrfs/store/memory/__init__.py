"""fsspec's in-memory filesystem as a store (`driver`)."""

from .driver import PROTOCOLS, MemoryDriver

__all__ = ["PROTOCOLS", "MemoryDriver"]
