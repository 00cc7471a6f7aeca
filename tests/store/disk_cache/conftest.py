"""Fixtures of the disk cache tests: a moto S3 server, and the twin array on it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.disk_cache_mounts import CHUNK, GRID
from tests.helpers.s3_server import S3Server, free_port, serving
from tests.helpers.scale_arrays import twin_on_s3


@pytest.fixture
def s3_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[S3Server]:
    yield from serving(S3Server(free_port()), monkeypatch)


@pytest.fixture
def twin(s3_server: S3Server, tmp_path: Path) -> str:
    """A 512 x 512 uint8 array of 8 x 8 chunks on S3 (`scale_arrays.values`); its URL."""
    return twin_on_s3(s3_server, tmp_path, GRID, CHUNK)
