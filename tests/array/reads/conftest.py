"""Fixtures of the read tests: the array the readahead tests (test_readahead_*.py) read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.helpers.readahead_slabs import opened_array


@pytest.fixture
def array(tmp_path: Path) -> Any:
    opened = opened_array(tmp_path)
    yield opened
    opened.close()
