"""Icechunk repositories for tests, written with icechunk and zarr-python (the oracle)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import icechunk
import numpy as np
import zarr

PLAIN = "plain"  # a v3 array of plain chunks
SHARDED = "sub/sharded"  # a sharded array in a subgroup


@dataclass
class Repository:
    url: str  # what zarrfs mounts
    repo: icechunk.Repository

    def read(self, array: str, *, snapshot_id: str | None = None, branch: str = "main") -> np.ndarray:
        """What zarr-python reads of `array` through icechunk."""
        session = (self.repo.readonly_session(snapshot_id=snapshot_id) if snapshot_id
                   else self.repo.readonly_session(branch=branch))
        return np.asarray(zarr.open_array(session.store, path=array, mode="r")[...])

    def commit(self, message: str, **writes: tuple[tuple[slice, ...], object]) -> str:
        """Commit assignments `array_name=(selection, value)` to `main` as another writer
        would; the new snapshot id. Array names use `__` for `/`."""
        session = self.repo.writable_session("main")
        for name, (selection, value) in writes.items():
            zarr.open_array(session.store, path=name.replace("__", "/"), mode="r+")[selection] = value
        return str(session.commit(message))


def create(path: Path) -> Repository:
    """A local repository (see `create_in`)."""
    return create_in(icechunk.local_filesystem_storage(str(path)), f"icechunk://{path}")


def create_on_s3(endpoint_url: str, bucket: str, prefix: str) -> Repository:
    """A repository on an S3 server (credentials from the environment)."""
    storage = icechunk.s3_storage(bucket=bucket, prefix=prefix, region="us-east-1",
                                  endpoint_url=endpoint_url, allow_http=True,
                                  force_path_style=True, from_env=True)
    return create_in(storage, f"icechunk://s3://{bucket}/{prefix}")


def create_in(storage: icechunk.Storage, url: str) -> Repository:
    """A repository whose `main` holds a group with a plain int32 array and a sharded
    float64 array (in a subgroup), committed once and tagged `v1`."""
    repo = icechunk.Repository.create(storage)
    session = repo.writable_session("main")
    root = zarr.group(store=session.store, attributes={"title": "icechunk test"})
    plain = root.create_array(PLAIN, shape=(30, 20), chunks=(8, 8), dtype="int32", fill_value=-1)
    plain[:] = np.arange(600, dtype="int32").reshape(30, 20)
    sharded = root.create_group("sub").create_array(
        "sharded", shape=(40, 12), chunks=(5, 4), shards=(10, 12), dtype="float64",
        fill_value=0.0)
    sharded[:] = np.linspace(0, 1, 480).reshape(40, 12)
    repo.create_tag("v1", session.commit("first"))
    return Repository(url, repo)
