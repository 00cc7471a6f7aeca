"""The fault-injecting filesystem, and what zarrfs's Store makes of its faults.

Each test wraps a local directory (tmp_path) in a FaultyFileSystem; to the Store that is a
remote filesystem, so transient faults are retried, within a short RetryPolicy deadline. Its
rules also come from a file, reloaded when it changes, for another process to pick up.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from fsspec.implementations.local import LocalFileSystem

from tests.helpers.faulty_fs import CONFIG_ENV, FaultyFileSystem, child_env, read_counters, write_config
from tests.helpers.faulty_stores import DEADLINE, PATIENT, SHARDED, SHORT, faulty_store, make_array
from tests.helpers.mounting import wait_until
from zarrfs.errors import StoreError
from zarrfs.store import Store

pytestmark = pytest.mark.fast


REPO = Path(__file__).resolve().parents[2]


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
