"""Fixtures of the reliability suite: the fault-injecting filesystem and a local S3 server.

The repository root goes on sys.path so that ``tests.helpers.faulty_fs`` imports under that
one name whatever pytest's import mode (a daemon started later imports ``faulty_fs`` by the same
name, and fsspec finds it by it).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.helpers import faulty_fs  # noqa: E402
from tests.helpers.s3_server import S3Server, free_port, serving  # noqa: E402


@pytest.fixture(autouse=True, scope="session")
def _register_faulty() -> None:
    faulty_fs.register()


@pytest.fixture
def s3_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[S3Server]:
    """A fresh moto S3 server with an empty bucket; stopped at the end whatever happens."""
    yield from serving(S3Server(free_port()), monkeypatch)
