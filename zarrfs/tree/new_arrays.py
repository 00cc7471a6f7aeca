"""How arrays made through the mount (`.npy` files written into a group: `uploads`) are laid
out: the mount's `new_codec=` and `new_chunks=`, and the array's name from the file's."""

from __future__ import annotations

import errno
from dataclasses import dataclass

from ..errors import EditRefused, MetadataError
from ..formats.creation import new_array_files
from ..formats.documents import valid_child_name
from ..views.registry import NpyHeader

NPY_SUFFIX = ".npy"


@dataclass
class NewArrays:
    codec: str = "zstd"
    chunks: tuple[int, ...] | None = None  # None: about 1 MiB (`formats.creation.auto_chunks`)

    def files(self, zarr_format: int, header: NpyHeader) -> dict[str, bytes]:
        """The metadata files of the array a .npy stream makes (MetadataError: it cannot be)."""
        if self.chunks is not None and len(self.chunks) != len(header.shape):
            raise MetadataError("new_chunks", f"{list(self.chunks)} has not the {len(header.shape)} "
                                              "dimensions of the .npy array")
        return new_array_files(zarr_format, header.shape, header.dtype, self.chunks, self.codec)


def array_name(file_name: str) -> str:
    """The array `NAME.npy` makes; EditRefused when it cannot name one."""
    name = file_name[: -len(NPY_SUFFIX)]
    if not file_name.endswith(NPY_SUFFIX) or not valid_child_name(name):
        raise EditRefused(errno.EPERM if not file_name.endswith(NPY_SUFFIX) else errno.EINVAL,
                          f"{file_name!r}: only NAME.npy files make arrays, NAME a valid node name")
    return name
