"""Fuzz target: consolidated metadata -- v2 `.zmetadata` (alone, or beside a `.zgroup`) and
v3 `consolidated_metadata` inline in a group's `zarr.json` -- every node it lists opened to
any depth, and the edit a change of attributes makes to it (tests/fuzz/nodes.py)."""

from __future__ import annotations

from .common import split
from .nodes import explore, store_of

CASES: tuple[tuple[str, ...], ...] = (
    ("zarr.json",),
    (".zmetadata",),
    (".zgroup", ".zmetadata"),
)


def fuzz_one(data: bytes) -> None:
    names, payload = split(data, CASES)
    explore(store_of(names, payload))
