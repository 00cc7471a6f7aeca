"""Fixtures of the FUSE tests: the array of the tests/fuse/test_mount_*.py modules, sharded or
plain."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(params=["sharded", "plain"])
def array_path(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """A 60x70 uint16 array holding reference_values(), written by TensorStore (imported here:
    this room's light tests run where there is none)."""
    import tensorstore as ts

    from tests.helpers.fuse_arrays import make_array, reference_values

    path = tmp_path / "array.zarr"
    make_array(path, shards=request.param == "sharded")
    spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path)}}
    ts.open(spec).result().write(reference_values()).result()
    return path
