"""The driver of zip archives: read-only, their reads retried and observed by the store of the
archive itself (`core.Store.open`), listings and sizes from the central directory."""

from __future__ import annotations

from ..driver import Driver


class ZipDriver(Driver):
    read_only = True
