"""Fixtures of the array tests: where the array of the recheck tests (tests/array/test_recheck_*.py)
lives, a local directory or S3 through a local moto server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.helpers.s3_server import S3_ENV, S3Server, free_port, running

if TYPE_CHECKING:  # (imported by the fixtures: it needs TensorStore, which the light tests lack)
    from tests.helpers.recheck_mounts import Backend


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    """One moto server for the module (each test uses its own prefix)."""
    pytest.importorskip("moto.server")
    pytest.importorskip("s3fs")
    with pytest.MonkeyPatch.context() as patch:
        for name, value in S3_ENV.items():
            patch.setenv(name, value)
        with running(S3Server(free_port())) as server:
            yield server


@pytest.fixture(params=["local", "s3"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    from tests.helpers.recheck_mounts import Backend
    if request.param == "local":
        return Backend("local", str(tmp_path / "store"))
    server: S3Server = request.getfixturevalue("s3")
    prefix = request.node.name.replace("[", "-").rstrip("]")
    return Backend("s3", f"s3://{server.bucket}/{prefix}", server, prefix)


@pytest.fixture
def local(tmp_path: Path) -> Backend:
    from tests.helpers.recheck_mounts import Backend
    return Backend("local", str(tmp_path / "store"))
