"""Reference sets (kerchunk / VirtualiZarr): placeholder replaced by the references work."""

from __future__ import annotations

from typing import Any


def is_reference_source(url: str, options: dict[str, Any]) -> bool:
    return False
