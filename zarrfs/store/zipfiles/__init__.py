"""Zip files (`.zip`, `.ozx`) as read-only stores: a local or remote zip's central directory
read once (`index`), its members' byte ranges read as spans of the zip (`spans`), served as a
filesystem (`filesystem`). A zip source is an adapter (`ZipSource.over`): its driver reads the
archive through the store of its directory, whatever that store's driver."""

from .driver import ZipDriver
from .filesystem import ZippedFileSystem, ZipSource

__all__ = ["ZipDriver", "ZipSource", "ZippedFileSystem"]
