"""The fast tier (`bash scripts/test --fast`, `pytest -m fast`): the tests pytest selects by the
marker `fast`, however a module sets it (`pytestmark = pytest.mark.fast`, a list of marks naming
it anywhere, `@pytest.mark.fast` on a test or a class, `pytest.param(..., marks=...)`).
Asked of pytest itself, which resolves the marks, here for tests/scripts/test_light_tests.py."""

from __future__ import annotations

import functools
import re
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


@functools.cache
def fast_modules() -> frozenset[str]:
    """The fast tier's modules, as paths below tests/ (`store/test_deadlines.py`): those holding
    a test that `pytest --collect-only -m fast` collects (a line `tests/MODULE: COUNT` each)."""
    command = [sys.executable, "-m", "pytest", "--collect-only", "-qq", "-m", "fast",
               "-p", "no:cacheprovider", "-p", "no:xdist", str(TESTS)]
    done = subprocess.run(command, cwd=TESTS.parent, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"pytest could not collect the fast tier:\n{done.stdout}{done.stderr}"
    counts = re.findall(r"^tests/(\S+\.py): (\d+)$", done.stdout, re.M)
    return frozenset(path for path, count in counts if int(count) > 0)
