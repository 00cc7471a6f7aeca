"""Watch what a mount's cache holds at each put of a write-back (tests without FUSE)."""

from __future__ import annotations

from typing import Any

import pytest

from zarrfs.array import ZarrArray


def cached_bytes_at_puts(array: ZarrArray, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A list that gets, at each put of `array`'s store, the bytes its cache's entries hold."""
    cache, seen = array.cache, []
    put = array.store.put

    def watched_put(key: str, data: Any, **kwargs: Any) -> Any:
        with cache.lock:
            seen.append(sum(entry.nbytes for entry in cache.entries.values()))
        return put(key, data, **kwargs)

    monkeypatch.setattr(array.store, "put", watched_put)
    return seen
