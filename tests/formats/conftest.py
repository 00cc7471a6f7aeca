"""Fixtures of the format tests: each Zarr v1 case written by the specification's writer
(tests/helpers/v1_spec.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.helpers.v1_spec import CASES, V1Case, stored_case


@pytest.fixture(params=sorted(CASES))
def v1_store(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[V1Case, Path, np.ndarray]:
    return stored_case(request.param, tmp_path)
