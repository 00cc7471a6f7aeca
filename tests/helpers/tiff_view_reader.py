"""A TIFF view's bytes as a file object, for tifffile without FUSE (tests/views/tiff/)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from zarrfs.array_metadata import open_array
from zarrfs.declared import OptionValues
from zarrfs.store import Store
from zarrfs.views.files import FileForm
from zarrfs.views.placement.core import NOWHERE, Placement
from zarrfs.views.plugins import PLUGIN_FILTERS
from zarrfs.views.tiff.array_file import TiffFile, tiff_file
from zarrfs.views.tiff.parts import STRIPS


def array_tiff(path: Path, *, plugins: bool = False, strips: bool = False,
               placement: Placement = NOWHERE) -> TiffFile:
    """`data.tif` of the array at `path`, as a mount with `-o filters=plugins` (`plugins`) or
    `-o tiff=strips` (`strips`) shows it."""
    form = FileForm("little", OptionValues({PLUGIN_FILTERS: plugins, STRIPS: strips}))
    return tiff_file(open_array(Store.open(str(path))), form, lambda: placement)


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
