"""Zip files (`.zip`, `.ozx`) as read-only stores: a local or remote zip's central directory
read once (`index`), its members' byte ranges read as spans of the zip (`spans`), served as a
filesystem (`filesystem`)."""

from .driver import ZipDriver
from .filesystem import ZippedFileSystem, ZipSource, open_zip

__all__ = ["ZipDriver", "ZipSource", "ZippedFileSystem", "open_zip"]
