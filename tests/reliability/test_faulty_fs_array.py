"""What zarrfs's ZarrArray makes of the fault-injecting filesystem's faults: short reads of a
shard index, an inner chunk or a whole chunk are clear errors; reads get through transient
faults and fail cleanly when the store is down; a failed write-back keeps the data for a retry.

Each test wraps a local directory (tmp_path) in a FaultyFileSystem; to the Store that is a
remote filesystem, so transient faults are retried, within a short RetryPolicy deadline.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.faulty_fs import FaultyFileSystem
from tests.helpers.faulty_stores import SHARDED, SHORT, VALUES, WHOLE, faulty_store, make_array
from zarrfs.array import ZarrArray
from zarrfs.array.stored import shard_reads
from zarrfs.array_metadata import open_array
from zarrfs.codecs import CodecError
from zarrfs.errors import ChunkError, StoreError
from zarrfs.grid import Box
from zarrfs.store import RetryPolicy, SuffixRange

pytestmark = pytest.mark.fast


PLAIN = {
    **SHARDED,
    "codecs": [
        {"name": "bytes", "configuration": {"endian": "little"}},
        {"name": "zstd", "configuration": {"level": 1}},
    ],
}


@pytest.fixture
def sharded(tmp_path: Path) -> Iterator[tuple[FaultyFileSystem, ZarrArray]]:
    fs, s = faulty_store(tmp_path / "sharded")
    make_array(s, SHARDED).close()
    array = open_array(s, threads=2)  # a fresh cache: every read goes to the store
    yield fs, array
    array.close()


@pytest.fixture
def plain(tmp_path: Path) -> Iterator[tuple[FaultyFileSystem, ZarrArray]]:
    fs, s = faulty_store(tmp_path / "plain")
    make_array(s, PLAIN).close()
    array = open_array(s, threads=2)
    yield fs, array
    array.close()


def test_short_read_of_a_shard_index_is_a_clear_error(
    sharded: tuple[FaultyFileSystem, ZarrArray],
) -> None:
    fs, array = sharded
    fs.set_rules(
        [{"methods": ["cat_file"], "pattern": "*/c/1/0", "action": "short", "keep_bytes": 10}]
    )
    with pytest.raises(ChunkError) as caught:
        array.read(Box((8, 0), (12, 4)))
    assert caught.value.key == "c/1/0"
    assert "index" in caught.value.problem
    # The codec says the same about those bytes.
    sharding = array.sharding
    assert sharding is not None
    raw = array.store.get("c/1/0", SuffixRange(sharding.index_nbytes))
    assert raw is not None and len(raw) == 10
    with pytest.raises(CodecError, match="index"):
        sharding.decode_index(raw, None)
    # Other shards still read, and so does this one once the store behaves.
    assert np.array_equal(array.read(Box((0, 0), (8, 8))), VALUES[:8, :8])
    fs.clear_rules()
    assert np.array_equal(array.read(WHOLE), VALUES)


def test_short_read_of_an_inner_chunk_is_a_clear_error(
    sharded: tuple[FaultyFileSystem, ZarrArray],
) -> None:
    fs, array = sharded
    assert np.array_equal(array.read(Box((0, 0), (4, 4))), VALUES[:4, :4])  # caches the index
    fs.set_rules(
        [{"methods": ["cat_file"], "pattern": "*/c/0/0", "action": "short", "drop_bytes": 5}]
    )
    with pytest.raises(ChunkError) as caught:
        array.read(Box((4, 4), (8, 8)))
    assert caught.value.key == "c/0/0"
    fs.clear_rules()
    assert np.array_equal(array.read(Box((4, 4), (8, 8))), VALUES[4:8, 4:8])


def test_short_size_report_misplaces_the_index_read(
    sharded: tuple[FaultyFileSystem, ZarrArray], monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A shard read in parts: its index is found from the size the store reports.
    monkeypatch.setattr(shard_reads, "SMALL_SHARD_BYTES", 0)
    monkeypatch.setattr(shard_reads, "WHOLE_FRACTION", 2.0)
    fs, array = sharded
    fs.set_rules([{"methods": ["info"], "pattern": "*/c/1/1", "action": "short", "drop_bytes": 3}])
    with pytest.raises(ChunkError) as caught:
        array.read(Box((8, 8), (16, 16)))
    assert caught.value.key == "c/1/1"


def test_a_shard_read_whole_needs_no_size_report(
    sharded: tuple[FaultyFileSystem, ZarrArray],
) -> None:
    fs, array = sharded
    fs.set_rules([{"methods": ["info"], "pattern": "*/c/1/1", "action": "short", "drop_bytes": 3}])
    assert np.array_equal(array.read(Box((8, 8), (16, 16))), VALUES[8:16, 8:16])


def test_short_read_of_a_whole_chunk_is_a_clear_error(
    plain: tuple[FaultyFileSystem, ZarrArray],
) -> None:
    fs, array = plain
    fs.set_rules(
        [
            {
                "methods": ["cat_file"],
                "pattern": "*/c/0/1",
                "action": "short",
                "drop_bytes": 7,
                "times": 1,
            }
        ]
    )
    with pytest.raises(ChunkError) as caught:
        array.read(WHOLE)
    assert caught.value.key == "c/0/1"
    assert np.array_equal(array.read(WHOLE), VALUES)  # not cached as broken


@pytest.mark.parametrize("fixture", ["sharded", "plain"])
def test_array_reads_through_transient_faults(fixture: str, request: pytest.FixtureRequest) -> None:
    fs, array = request.getfixturevalue(fixture)
    fs.set_rules(
        [
            {
                "name": "flaky",
                "methods": ["cat_file", "info"],
                "pattern": "*/c/*",
                "times": 6,
                "exception": "TimeoutError",
                "errno": "ETIMEDOUT",
            }
        ]
    )
    assert np.array_equal(array.read(WHOLE), VALUES)
    assert fs.faults["flaky"] == 6


@pytest.mark.parametrize("fixture", ["sharded", "plain"])
def test_array_read_fails_cleanly_when_the_store_is_down(
    fixture: str, request: pytest.FixtureRequest
) -> None:
    fs, array = request.getfixturevalue(fixture)
    array.store.retry = SHORT
    fs.set_rules([{"methods": ["cat_file", "info"], "pattern": "*/c/1/*"}])
    with pytest.raises(StoreError):
        array.read(WHOLE)
    assert np.array_equal(array.read(Box((0, 0), (8, 16))), VALUES[:8])
    fs.clear_rules()
    assert np.array_equal(array.read(WHOLE), VALUES)


@pytest.mark.parametrize("fixture", ["sharded", "plain"])
def test_failed_write_back_keeps_the_data_for_a_retry(
    fixture: str, request: pytest.FixtureRequest
) -> None:
    fs, array = request.getfixturevalue(fixture)
    array.store.retry = SHORT
    new = -VALUES
    array.write(WHOLE, new)
    fs.set_rules([{"name": "down", "methods": ["pipe_file", "rm_file"]}])
    with pytest.raises(StoreError):
        array.flush()
    assert array.dirty_bytes > 0
    assert np.array_equal(array.read(WHOLE), new)  # the cache still has the writes
    fs.clear_rules()
    array.flush()
    assert array.dirty_bytes == 0
    again = open_array(array.store, threads=2)
    try:
        assert np.array_equal(again.read(WHOLE), new)
    finally:
        again.close()


def test_concurrent_reads_through_random_faults(tmp_path: Path) -> None:
    """Many threads reading overlapping boxes while a third of all chunk reads fail: every
    read returns the right values (retried within a generous deadline)."""
    fs, s = faulty_store(tmp_path / "busy")
    make_array(s, SHARDED).close()
    s.retry = RetryPolicy(deadline_seconds=10, first_delay=0.001, max_delay=0.01)
    array = open_array(s, threads=4, cache_bytes=128)  # two inner chunks: reads keep loading
    fs.set_rules(
        [
            {
                "name": "coin",
                "methods": ["cat_file", "info"],
                "pattern": "*/c/*",
                "probability": 0.3,
                "exception": "ConnectionError",
                "errno": "ECONNRESET",
            }
        ]
    )
    rng = np.random.default_rng(0)
    boxes = []
    for _ in range(64):
        start = rng.integers(0, 15, size=2)
        stop = start + rng.integers(1, 17 - start, size=2)
        boxes.append(Box(tuple(map(int, start)), tuple(map(int, stop))))
    wrong: list[Box] = []
    errors: list[BaseException] = []

    def reader(part: list[Box]) -> None:
        try:
            for box in part:
                if not np.array_equal(array.read(box), VALUES[box.slices()]):
                    wrong.append(box)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=reader, args=(boxes[i::8],)) for i in range(8)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert not any(t.is_alive() for t in threads)
    finally:
        array.close()
    assert not errors, errors[:3]
    assert not wrong
    assert fs.faults["coin"] > 10
