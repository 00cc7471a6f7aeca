"""A file's bytes as the server sends them: what a GET reads (`FileReader`, through the view's
read-ahead and the mount's decoding processes when it streams the file, by plain reads of the
bytes asked for when it reads a range, as a pread does). What a PUT writes: `uploads`."""

from __future__ import annotations

from ..views import FileView, Reading
from ..views.files import STREAM_BLOCK

# A GET of more than this streams the file through its read-ahead; less is read as asked
# (one tile of data.tif costs that tile's store requests).
STREAMED_BYTES = 4 * STREAM_BLOCK


class FileReader:
    """The file-like object a GET reads (`seek`, `read`, `close`)."""

    def __init__(self, view: FileView, *, streamed: bool) -> None:
        self._view = view
        self._streamed = streamed
        self._reading: Reading | None = None
        self._offset = 0

    def seek(self, offset: int, whence: int = 0) -> int:
        self._offset = offset
        return offset

    def read(self, size: int = -1) -> bytes:
        left = self._view.size - self._offset
        size = left if size < 0 else min(size, left)
        if size <= 0:
            return b""
        if self._streamed and self._reading is None:
            self._reading = self._view.readahead()  # (in the thread that reads: the view's rule)
            self._streamed = self._reading is not None
        got = self._view.read(self._offset, size) if self._reading is None else \
            self._reading.ready(self._offset, size) or self._reading.read(self._offset, size)
        self._offset += len(got)
        return bytes(got)

    def close(self) -> None:
        if self._reading is not None:
            self._reading.close()
            self._reading = None
