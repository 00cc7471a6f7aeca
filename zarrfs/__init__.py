"""zarrfs: a Zarr v3 array as a directory of plain files, for ordinary Unix tools.

From Python, `zarrfs.mount(source, **options)` mounts with the real daemon (see `api`)."""

from .api import Mount, mount
from .errors import MountError

__version__ = "0.1.0"

__all__ = ["Mount", "MountError", "__version__", "mount"]
