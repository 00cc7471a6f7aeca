"""The fast tier (`bash scripts/test --fast`, `pytest -m fast`): the tests marked `fast` in their
own modules, a whole module by `pytestmark = pytest.mark.fast` (or a list beginning with it,
on that line) and a test by `@pytest.mark.fast` above it. Found here by those lines, without
importing the module: tests/conftest.py leaves the modules holding none of them uncollected
under `-m fast`, tests/scripts/test_light_tests.py lists the tier's modules."""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]

MARKED = re.compile(rb"^(?:pytestmark = \[?pytest\.mark\.fast\b|[ \t]*@pytest\.mark\.fast\b)", re.M)


def has_fast_tests(module: Path) -> bool:
    """Whether the test module at `module` marks itself, or any of its tests, `fast`."""
    return MARKED.search(module.read_bytes()) is not None


def fast_modules() -> set[str]:
    """The fast tier's modules, as paths below tests/ (`store/test_deadlines.py`)."""
    return {path.relative_to(TESTS).as_posix() for path in TESTS.rglob("test_*.py")
            if has_fast_tests(path)}
