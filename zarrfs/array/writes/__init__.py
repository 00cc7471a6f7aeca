"""The writes room: writing dirty chunks back to the store, merged with what another writer
stored (`writeback`), chunks stored ahead of a flush (`early`) and resizing an array's chunks
(`resize`). It imports the cache, stored and reads rooms."""

from .early import Early
from .resize import MetadataWriter, Resizer
from .writeback import WriteBack

__all__ = ["Early", "MetadataWriter", "Resizer", "WriteBack"]
