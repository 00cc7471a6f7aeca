"""A TIFF view's bytes as a file object, for tifffile without FUSE (tests/views/tiff/)."""

from __future__ import annotations

import io
from typing import Any

from zarrfs.views.tiff.array_file import TiffFile


class ViewReader(io.RawIOBase):
    """A file object over a view's `read`, as the fuse layer would serve it (`most`: the
    bytes one read asks of the view at most)."""

    def __init__(self, view: TiffFile, most: int = 128 << 10) -> None:
        self.view = view
        self.position = 0
        self.most = most

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        self.position = [offset, self.position + offset, self.view.size + offset][whence]
        return self.position

    def tell(self) -> int:
        return self.position

    def readinto(self, buffer: Any) -> int:
        data = bytes(self.view.read(self.position, min(len(buffer), self.most)))
        buffer[: len(data)] = data
        self.position += len(data)
        return len(data)
