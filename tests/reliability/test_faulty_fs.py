"""The fault-injecting filesystem, and what zarrfs's Store and ZarrArray make of its faults.

Each test wraps a local directory (tmp_path) in a FaultyFileSystem; to the Store that is a
remote filesystem, so transient faults are retried, within a short RetryPolicy deadline.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fsspec.implementations.local import LocalFileSystem

from tests.helpers.faulty_fs import (
    CONFIG_ENV,
    FaultyFileSystem,
    child_env,
    read_counters,
    write_config,
)
from tests.helpers.mounting import wait_until
from zarrfs.array import ZarrArray
from zarrfs.array.stored import shard_reads
from zarrfs.array_metadata import create_array, open_array
from zarrfs.codecs import CodecError
from zarrfs.errors import ChunkError, StoreError
from zarrfs.formats.v3 import parse_metadata
from zarrfs.grid import Box
from zarrfs.store import RetryPolicy, Store, SuffixRange

pytestmark = pytest.mark.fast

# Tests of giving up use a short deadline; tests of succeeding after faults a long one, so a
# loaded machine cannot turn a handful of retries into a missed deadline.
DEADLINE = 0.4
SHORT = RetryPolicy(deadline_seconds=DEADLINE, first_delay=0.01, max_delay=0.1)
PATIENT = RetryPolicy(deadline_seconds=10, first_delay=0.01, max_delay=0.05)
REPO = Path(__file__).resolve().parents[2]


def faulty_store(
    root: Path, rules: Sequence[dict[str, Any]] = ()
) -> tuple[FaultyFileSystem, Store]:
    root.mkdir(parents=True, exist_ok=True)
    fs = FaultyFileSystem(fs=LocalFileSystem(auto_mkdir=True), rules=rules)
    return fs, Store(fs, str(root), retry=PATIENT)


@pytest.fixture
def store(tmp_path: Path) -> tuple[FaultyFileSystem, Store]:
    fs, store = faulty_store(tmp_path / "store")
    store.put("a/key", b"0123456789")
    fs.calls.clear()
    return fs, store


# One call of each Store operation, and the filesystem method it goes through.
OPERATIONS = {
    "get": ("cat_file", lambda s: s.get("a/key")),
    "size": ("info", lambda s: s.size("a/key")),
    "list": ("find", lambda s: list(s.list("a"))),
    "put": ("pipe_file", lambda s: s.put("a/key", b"new")),
    "delete": ("rm_file", lambda s: s.delete("a/key")),
}


# -- the wrapper and the store ----------------------------------------------------------------


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_transient_failure_is_retried_and_succeeds(
    store: tuple[FaultyFileSystem, Store], operation: str
) -> None:
    fs, s = store
    method, call = OPERATIONS[operation]
    fs.set_rules(
        [
            {
                "name": "flaky",
                "methods": [method],
                "action": "error",
                "times": 2,
                "errno": "ECONNRESET",
                "exception": "ConnectionError",
            }
        ]
    )
    call(s)
    assert fs.faults["flaky"] == 2
    assert fs.calls[method] == 3


def test_transient_read_returns_the_data(store: tuple[FaultyFileSystem, Store]) -> None:
    fs, s = store
    fs.set_rules([{"methods": ["cat_file"], "pattern": "*/a/key", "times": 3}])
    assert s.get("a/key") == b"0123456789"
    assert fs.injected == 3


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_permanent_failure_is_a_store_error_after_the_deadline(
    store: tuple[FaultyFileSystem, Store], operation: str
) -> None:
    fs, s = store
    s.retry = SHORT
    method, call = OPERATIONS[operation]
    fs.set_rules([{"name": "down", "methods": [method], "action": "error", "errno": "EIO"}])
    began = time.monotonic()
    with pytest.raises(StoreError) as caught:
        call(s)
    took = time.monotonic() - began
    assert caught.value.key == ("a" if operation == "list" else "a/key")
    assert "injected fault" in str(caught.value)
    assert fs.faults["down"] >= 2, "a transient-looking fault must be retried"
    assert DEADLINE * 0.4 <= took <= DEADLINE + 3, took


def test_permission_error_is_not_retried(store: tuple[FaultyFileSystem, Store]) -> None:
    fs, s = store
    fs.set_rules([{"methods": ["cat_file"], "exception": "PermissionError", "errno": "EACCES"}])
    with pytest.raises(StoreError):
        s.get("a/key")
    assert fs.calls["cat_file"] == 1


def test_missing_key_reads_as_none_without_retrying(store: tuple[FaultyFileSystem, Store]) -> None:
    fs, s = store
    fs.set_rules([{"methods": ["cat_file"], "exception": "FileNotFoundError", "errno": "ENOENT"}])
    assert s.get("a/key") is None
    assert fs.calls["cat_file"] == 1


def test_put_that_finds_no_container_is_an_error(store: tuple[FaultyFileSystem, Store]) -> None:
    """A put the backend answers with FileNotFoundError (s3fs does for a missing bucket) did
    not store anything; reporting success would lose the data."""
    fs, s = store
    fs.set_rules([{"methods": ["pipe_file"], "exception": "FileNotFoundError", "errno": "ENOENT"}])
    with pytest.raises(StoreError):
        s.put("a/key", b"data that must not vanish")


def test_hang_then_proceed(store: tuple[FaultyFileSystem, Store]) -> None:
    fs, s = store
    fs.set_rules([{"methods": ["cat_file"], "action": "hang", "seconds": 0.3, "times": 1}])
    began = time.monotonic()
    assert s.get("a/key") == b"0123456789"
    assert time.monotonic() - began >= 0.3


def test_hang_then_timeout_is_retried(store: tuple[FaultyFileSystem, Store]) -> None:
    fs, s = store
    fs.set_rules(
        [{"methods": ["cat_file"], "action": "hang", "seconds": 0.1, "then": "error", "times": 1}]
    )
    assert s.get("a/key") == b"0123456789"
    assert fs.calls["cat_file"] == 2


def test_hang_ends_early_when_its_rule_is_removed(store: tuple[FaultyFileSystem, Store]) -> None:
    fs, s = store
    fs.set_rules([{"name": "stall", "methods": ["cat_file"], "action": "hang", "seconds": 30}])
    result: list[bytes | None] = []
    reader = threading.Thread(target=lambda: result.append(s.get("a/key")))
    began = time.monotonic()
    reader.start()
    wait_until(lambda: fs.faults["stall"] == 1, what="the read hanging on the rule")
    fs.clear_rules()
    reader.join(timeout=5)
    assert not reader.is_alive()
    assert result == [b"0123456789"]
    assert time.monotonic() - began < 3


def test_skip_and_pattern_select_calls(store: tuple[FaultyFileSystem, Store]) -> None:
    fs, s = store
    s.put("b/other", b"x")
    fs.set_rules(
        [
            {
                "name": "third",
                "methods": ["cat_file"],
                "pattern": "*/a/*",
                "skip": 2,
                "times": 1,
                "exception": "PermissionError",
            }
        ]
    )
    assert s.get("b/other") == b"x"  # pattern does not match
    assert s.get("a/key") == b"0123456789"
    assert s.get("a/key") == b"0123456789"
    with pytest.raises(StoreError):
        s.get("a/key")  # the third matching call
    assert s.get("a/key") == b"0123456789"  # disarmed after `times`
    assert fs.faults == {"third": 1}


def test_short_data(store: tuple[FaultyFileSystem, Store]) -> None:
    fs, s = store
    fs.set_rules(
        [
            {"methods": ["cat_file"], "action": "short", "keep_bytes": 4, "times": 1},
            {"methods": ["info"], "action": "short", "drop_bytes": 3, "times": 1},
        ]
    )
    assert s.get("a/key") == b"0123"
    assert s.size("a/key") == 7


def test_probability_is_seeded(tmp_path: Path) -> None:
    counts = []
    for run in range(2):
        fs, s = faulty_store(tmp_path / f"run{run}")
        s.put("k", b"v")
        fs.set_rules(
            [
                {
                    "name": "coin",
                    "methods": ["info"],
                    "probability": 0.5,
                    "exception": "PermissionError",
                }
            ]
        )
        for _ in range(100):
            with contextlib.suppress(StoreError):
                s.size("k")
        counts.append(fs.faults["coin"])
    assert counts[0] == counts[1]
    assert 20 <= counts[0] <= 80


@pytest.mark.parametrize(
    ("rule", "problem"),
    [
        ({"action": "explode"}, "unknown action 'explode'"),
        ({"methods": ["open"]}, "methods must be among"),
        ({"action": "short", "methods": ["pipe_file"], "keep_bytes": 1}, "short data applies to"),
        ({"action": "short", "methods": ["cat_file"]}, "give exactly one of keep_bytes and drop_bytes"),
        ({"exception": "KeyError"}, "unknown exception 'KeyError'"),
        ({"errno": "ENOTANERRNO"}, "unknown errno 'ENOTANERRNO'"),
        ({"colour": "red"}, r"unknown members \['colour'\]"),
    ],
)
def test_bad_rules_are_refused(rule: dict[str, Any], problem: str) -> None:
    # (the message, so that the rule is refused for its own problem, not any ValueError)
    with pytest.raises(ValueError, match=problem):
        FaultyFileSystem(fs=LocalFileSystem(), rules=[rule])


# -- rules from a file, for another process ---------------------------------------------------


def test_rules_from_config_file_are_reloaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "faults.json"
    counters = tmp_path / "counters.json"
    settings = {
        "target_protocol": "file",
        "target_options": {"auto_mkdir": True},
        "counters_file": str(counters),
    }
    write_config(
        str(config),
        [{"name": "refuse", "methods": ["pipe_file"], "exception": "PermissionError"}],
        **settings,
    )
    monkeypatch.setenv(CONFIG_ENV, str(config))
    root = tmp_path / "arr"
    root.mkdir()
    s = Store.open(f"faulty://{root}")
    assert isinstance(s.driver.fs, FaultyFileSystem)
    with pytest.raises(StoreError):
        s.put("k", b"v")
    assert read_counters(str(counters))["faults"] == {"refuse": 1}
    write_config(str(config), [], **settings)  # disarm while the "daemon" runs
    s.put("k", b"v")
    assert (root / "k").read_bytes() == b"v"


def test_chained_url_takes_its_target_from_the_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "faults.json"
    write_config(str(config), [{"methods": ["cat_file"], "times": 1}])
    monkeypatch.setenv(CONFIG_ENV, str(config))
    (tmp_path / "arr").mkdir()
    (tmp_path / "arr" / "k").write_bytes(b"v")
    s = Store.open(f"faulty::file://{tmp_path / 'arr'}")
    s.retry = PATIENT
    assert s.get("k") == b"v"
    assert isinstance(s.driver.fs, FaultyFileSystem) and s.driver.fs.injected == 1


def run_cli_with_faults(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tests.helpers.faulty_fs", "zarrfs.cli", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=child_env(**{CONFIG_ENV: str(config)}),
        timeout=60,
        check=False,
    )


def test_a_separate_process_picks_up_the_rules(tmp_path: Path) -> None:
    """What a mount daemon would do: register `faulty` through the launcher, read the rules
    named in the environment, and report counters to a file."""
    root = tmp_path / "arr"
    array = make_array(faulty_store(root)[1], SHARDED)
    array.close()
    config, counters = tmp_path / "faults.json", tmp_path / "counters.json"
    settings = {"target_protocol": "file", "counters_file": str(counters)}
    write_config(
        str(config),
        [{"name": "flaky-meta", "methods": ["cat_file"], "pattern": "*/zarr.json", "times": 2}],
        **settings,
    )
    done = run_cli_with_faults(config, "info", f"faulty://{root}")
    assert done.returncode == 0, done.stderr
    assert "16" in done.stdout
    assert read_counters(str(counters))["faults"] == {"flaky-meta": 2}

    write_config(
        str(config),
        [{"name": "denied", "methods": ["cat_file"], "exception": "PermissionError"}],
        **settings,
    )
    done = run_cli_with_faults(config, "info", f"faulty://{root}")
    assert done.returncode == 1
    assert "zarr.json" in done.stderr and "injected fault" in done.stderr


# -- through the array ------------------------------------------------------------------------

SHARDED = {
    "zarr_format": 3,
    "node_type": "array",
    "shape": [16, 16],
    "data_type": "int32",
    "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [8, 8]}},
    "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
    "fill_value": 0,
    "attributes": {},
    "codecs": [
        {
            "name": "sharding_indexed",
            "configuration": {
                "chunk_shape": [4, 4],
                "codecs": [
                    {"name": "bytes", "configuration": {"endian": "little"}},
                    {"name": "zstd", "configuration": {"level": 1}},
                ],
                "index_codecs": [
                    {"name": "bytes", "configuration": {"endian": "little"}},
                    {"name": "crc32c"},
                ],
            },
        }
    ],
}
PLAIN = {
    **SHARDED,
    "codecs": [
        {"name": "bytes", "configuration": {"endian": "little"}},
        {"name": "zstd", "configuration": {"level": 1}},
    ],
}
VALUES = np.arange(256, dtype=np.int32).reshape(16, 16) + 1
WHOLE = Box((0, 0), (16, 16))


def make_array(s: Store, doc: dict[str, Any]) -> ZarrArray:
    array = create_array(s, parse_metadata(json.dumps(doc)), threads=2)
    array.write(WHOLE, VALUES)
    array.flush()
    return array


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
