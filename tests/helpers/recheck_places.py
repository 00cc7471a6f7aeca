"""Where the close-to-open tests keep a group: a local directory, or S3 (moto), with how
zarr-python reaches it and the mount's options (the fixtures `where` and `s3_server`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.s3_server import S3Server, free_port, serving


@pytest.fixture
def s3_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[S3Server]:
    pytest.importorskip("moto.server")
    yield from serving(S3Server(free_port()), monkeypatch)


@pytest.fixture(params=["local", "s3"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, dict[str, Any], list[str]]:
    """A group's URL, how zarr-python reaches it, and the mount's options."""
    if request.param == "local":
        return str(tmp_path / "g.zarr"), {}, []
    server: S3Server = request.getfixturevalue("s3_server")
    return (f"s3://{server.bucket}/g.zarr", {"storage_options": server.s3fs_options()},
            [f"endpoint_url={server.endpoint_url}"])
