"""Fixtures shared by the whole suite: mounting arrays for real, in a temporary directory;
the threads that decode streams; the fast tier (marker `fast`); skips fail under CI."""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from pathlib import Path
from types import TracebackType

import pytest

from tests.helpers import fast_tier
from tests.helpers.mounting import Mount, MountFactory, mounted
from zarrfs.array.reads import policy
from zarrfs.array.stored import chunk_io


@pytest.fixture
def mount_array(tmp_path: Path) -> Iterator[MountFactory]:
    """mount_array(source, options=(), **kwargs) -> Mount; unmounted at the end of the test,
    whether it passed or failed."""
    with ExitStack() as stack:
        count = 0

        def mount(source: str | Path, options: Sequence[str] = (), **kwargs: object) -> Mount:
            nonlocal count
            count += 1
            return stack.enter_context(
                mounted(source, tmp_path / f"mnt{count}", options, **kwargs)  # type: ignore[arg-type]
            )

        yield mount


@pytest.fixture(params=["loaders", "small-chunk lane"])
def stream_threads(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Streams decoded by the loader threads, then by the one-thread lane for small chunks
    that decode cheaply (zarrfs.array.reads.policy.SMALL_CHUNK_BYTES, chunk_io's measure)."""
    lane = request.param == "small-chunk lane"
    monkeypatch.setattr(policy, "SMALL_CHUNK_BYTES", 1 << 40 if lane else 0)
    monkeypatch.setattr(chunk_io, "MEASURED_DECODES", 0)
    monkeypatch.setattr(chunk_io, "CHEAP_DECODE_SECONDS", 1e9)
    return str(request.param)


# -- the fast tier, and no skips under CI ---------------------------------------------------

# `bash scripts/test --fast` (`pytest -m fast`): unit tests of every layer, whole modules, plus
# one real mount per main path. Each module says what of it is in the tier, and pytest resolves
# the marker (registered in pyproject.toml): `pytestmark = pytest.mark.fast` (alone or in a
# list) for the whole module, `@pytest.mark.fast` on a test (every parametrization of it). A
# room with none says why in its conftest.py (tests/scripts/test_light_tests.py). About three
# minutes on a quiet 2-core machine (docs/development.md): keep it from growing.


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    fast_tier.note(config, items)  # (before `-m fast` deselects: the tier's modules, in this run)


# Under CI a skip is a failure: a missing /dev/fuse or a declared test dependency that did not
# install must not pass as a green run of fewer tests.
STRICT = os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    _fail_if_skipped(outcome.get_result())  # type: ignore[attr-defined]


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[None]:
    outcome = yield
    _fail_if_skipped(outcome.get_result())  # type: ignore[attr-defined]


def _fail_if_skipped(report: pytest.TestReport | pytest.CollectReport) -> None:
    if not STRICT or not report.skipped or hasattr(report, "wasxfail"):
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    report.outcome = "failed"
    report.longrepr = f"skipped under CI, which must run everything: {reason}"


def pytest_unconfigure(config: pytest.Config) -> None:
    """After the run: adlfs closes each client at exit in a finalizer run with the event loop
    the client was made with, and a client zarr-python opened (asynchronous, no loop of its
    own) has none: each prints "RuntimeError: Loop is not running" after a run that passed.
    Those exits are dropped; any other error at exit is shown as before."""
    shown = sys.excepthook

    def hook(kind: type[BaseException], error: BaseException, trace: TracebackType | None) -> None:
        frames = [frame.f_code.co_filename for frame, _ in traceback.walk_tb(trace)]
        closing_client = str(error) == "Loop is not running" and any(
            name.endswith(os.path.join("fsspec", "asyn.py")) for name in frames)
        if not closing_client:
            shown(kind, error, trace)

    sys.excepthook = hook
