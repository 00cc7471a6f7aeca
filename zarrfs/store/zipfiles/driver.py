"""The driver of zip archives: read-only, listings and sizes from the central directory, each
read of the archive made through the store of its directory (`ZipSource.over`: any driver's),
which retries and observes it."""

from __future__ import annotations

from ..capabilities import Capabilities
from ..driver import Driver


class ZipDriver(Driver):
    capabilities = Capabilities(read_only=True)
