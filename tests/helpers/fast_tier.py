"""The fast tier (`bash scripts/test --fast`, `pytest -m fast`): the tests pytest selects by the
marker `fast`, however a module sets it (`pytestmark = pytest.mark.fast`, a list of marks naming
it anywhere, `@pytest.mark.fast` on a test or a class, `pytest.param(..., marks=...)`). Its
modules, as pytest resolved the marks, for tests/scripts/test_light_tests.py: noted while this
run collects (tests/conftest.py), when it collected every test module; else asked of pytest."""

from __future__ import annotations

import functools
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]

# (every module this run collected, those holding a test marked fast), paths below tests/
COLLECTED = pytest.StashKey[tuple[frozenset[str], frozenset[str]]]()


def note(config: pytest.Config, items: Sequence[pytest.Item]) -> None:
    """Note what the run collected, before `-m` or `-k` deselect any of it."""
    def below_tests(item: pytest.Item) -> str:
        return item.path.relative_to(TESTS).as_posix()

    found = [item for item in items if item.path.is_relative_to(TESTS)]
    fast = [item for item in found if item.get_closest_marker("fast")]
    config.stash[COLLECTED] = (frozenset(map(below_tests, found)), frozenset(map(below_tests, fast)))


def fast_modules(config: pytest.Config) -> frozenset[str]:
    """The fast tier's modules, as paths below tests/ (`store/test_deadlines.py`)."""
    collected, fast = config.stash.get(COLLECTED, (frozenset(), frozenset()))
    every = {path.relative_to(TESTS).as_posix() for path in TESTS.rglob("test_*.py")}
    return fast if collected >= every else _collected_apart()


@functools.cache
def _collected_apart() -> frozenset[str]:
    """What `pytest --collect-only -m fast` collects of tests/ (a line `tests/MODULE: COUNT` each)."""
    command = [sys.executable, "-m", "pytest", "--collect-only", "-qq", "-m", "fast",
               "-p", "no:cacheprovider", "-p", "no:xdist", str(TESTS)]
    done = subprocess.run(command, cwd=TESTS.parent, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"pytest could not collect the fast tier:\n{done.stdout}{done.stderr}"
    counts = re.findall(r"^tests/(\S+\.py): (\d+)$", done.stdout, re.M)
    return frozenset(path for path, count in counts if int(count) > 0)
