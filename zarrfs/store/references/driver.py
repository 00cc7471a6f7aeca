"""The driver of reference sets (kerchunk JSON or Parquet): read-only, each key's bytes read
from where its reference leads (`filesystem`), with no generation."""

from __future__ import annotations

from ..capabilities import Capabilities
from ..driver import Driver


class ReferencesDriver(Driver):
    capabilities = Capabilities(read_only=True)
