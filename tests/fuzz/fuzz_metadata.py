"""Fuzz target: the metadata documents of one node -- v3 `zarr.json` (array or group), v2
`.zarray`/`.zgroup` with `.zattrs`, v1 `meta` with `attrs` -- through discovery, description
and the codec pipeline (tests/fuzz/nodes.py). The first byte picks the files."""

from __future__ import annotations

from .common import split
from .nodes import explore, store_of

CASES: tuple[tuple[str, ...], ...] = (
    ("zarr.json",),
    (".zarray",),
    (".zarray", ".zattrs"),
    (".zgroup", ".zattrs"),
    ("meta",),
    ("meta", "attrs"),
)


def fuzz_one(data: bytes) -> None:
    names, payload = split(data, CASES)
    explore(store_of(names, payload))
