"""`Store.stats` without FUSE: what many keys' sizes and generations are, from one scan of
the directories holding them (local stores) in every chunk key encoding zarr-python writes,
agreeing with `Store.stat` key by key; and the directory a remote store lists for them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr

from tests.helpers.store_observers import Calls
from zarrfs.array_metadata import open_array
from zarrfs.store import Store
from zarrfs.store.listing import row_prefix
from zarrfs.store.many import STATS_ONE_BY_ONE

pytestmark = pytest.mark.fast

SHAPE, CHUNKS = (340, 330), (10, 10)  # 34 x 33 chunks: more than are asked for one by one


ENCODINGS: dict[str, dict[str, Any]] = {
    "v3-slash": {"zarr_format": 3},  # c/0/0
    "v3-dot": {"zarr_format": 3, "chunk_key_encoding": {"name": "default", "separator": "."}},  # c.0.0
    "v2-dot": {"zarr_format": 2},  # 0.0
    "v2-slash": {"zarr_format": 2, "chunk_key_encoding": {"name": "v2", "separator": "/"}},  # 0/0
}


def sparse_array(path: Path, encoding: dict[str, Any]) -> list[str]:
    """An array whose first row of chunks and a few others are fill (not stored); its keys."""
    values = np.arange(np.prod(SHAPE), dtype="u2").reshape(SHAPE) % 1000 + 1
    values[:10] = 0  # (a whole row: with "/" keys its directory is not there at all)
    values[50:70, 20:40] = 0
    written = zarr.create_array(path, shape=SHAPE, chunks=CHUNKS, dtype="u2", fill_value=0, **encoding)
    written[...] = values
    array = open_array(Store.open(str(path)))
    keys = [array.metadata.chunk_key_encoding.key(chunk) for chunk in np.ndindex(*array.grid_shape)]
    array.close()
    return keys


@pytest.mark.parametrize("encoding", ENCODINGS.values(), ids=ENCODINGS)
def test_scan_agrees_with_stat_key_by_key(tmp_path: Path, encoding: dict[str, Any]) -> None:
    keys = sparse_array(tmp_path / "a.zarr", encoding)
    (tmp_path / "a.zarr" / "not-a-directory").write_bytes(b"x")
    wanted = [*keys, "not-a-directory/0", "missing/0", "0.0.0"]
    assert len(wanted) > STATS_ONE_BY_ONE
    calls = Calls()
    store = Store.open(str(tmp_path / "a.zarr"), observer=calls)
    found = store.stats(wanted, dense=True)
    assert calls.kinds == ["list"]  # (one scan, no stat of a missing key)
    assert found.pop("not-a-directory/0") is None  # (stat: ENOTDIR, an error; a scan: not stored)
    assert found == {key: store.stat(key) for key in wanted if key != "not-a-directory/0"}
    assert list(found) == [key for key in wanted if key != "not-a-directory/0"]
    missing = {key for key, described in found.items() if described is None}
    assert len(missing) == 33 + 4 + 2  # the first row, the hole, the two made-up keys left


def test_a_few_of_many_keys_are_asked_for_one_by_one(tmp_path: Path) -> None:
    """Keys that are not most of their directories' (a recheck's: the chunks read so far)
    cost a stat each, not a scan of every chunk."""
    keys = sparse_array(tmp_path / "a.zarr", ENCODINGS["v2-dot"])  # (every chunk in one directory)
    calls = Calls()
    store = Store.open(str(tmp_path / "a.zarr"), observer=calls)
    found = store.stats(keys[:100])
    assert calls.kinds == ["stat"] * 100
    assert found == store.stats(keys[:100], dense=True)


def test_generations_follow_another_writers_rewrite(tmp_path: Path) -> None:
    """What a scan reports is what `stat` reports, before and after zarr-python rewrites a
    chunk (same size, new bytes) and deletes one: only those two change."""
    keys = sparse_array(tmp_path / "a.zarr", ENCODINGS["v3-slash"])
    store = Store.open(str(tmp_path / "a.zarr"))
    before = store.stats(keys, dense=True)
    other = zarr.open_array(tmp_path / "a.zarr", mode="r+")
    other[10:20, 0:10] = other[10:20, 0:10][::-1]  # chunk (1, 0): same size, new bytes
    other[20:30, 0:10] = 0  # chunk (2, 0): fill, deleted
    after = store.stats(keys, dense=True)
    assert after == {key: store.stat(key) for key in keys}
    assert {key for key in keys if after[key] != before[key]} == {"c/1/0", "c/2/0"}
    assert after["c/2/0"] is None and before["c/1/0"] is not None and after["c/1/0"] is not None
    assert after["c/1/0"][0] == before["c/1/0"][0]


@pytest.mark.parametrize(("key", "prefix"), [
    ("c/0/1", ("c/0", "")),
    ("c/10/0", ("c/10", "")),
    ("g/a/c/3/4", ("g/a/c/3", "")),
    ("0.1", ("", "0.")),
    ("c.12.0", ("", "c.12.")),
    ("g/a/3.4.5", ("g/a", "3.4.")),
    ("0", ("", "")),
])
def test_row_prefix(key: str, prefix: tuple[str, str]) -> None:
    assert row_prefix(key) == prefix
