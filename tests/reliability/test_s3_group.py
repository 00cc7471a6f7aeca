"""A group in S3 with consolidated metadata, mounted through a local moto server that logs every
request it answers.

The mount serves every array's `data` exactly as zarr-python reads it, and mounting, listing
the root (`ls -la`: every entry stat-ed) and listing an array directory read nothing but the
consolidated metadata (v2 `.zmetadata`; v3 the root `zarr.json` with its inline
`consolidated_metadata`): no per-array `.zarray`/`.zattrs`/`zarr.json` is fetched before a
file is opened, and mounting plus listing the root takes fewer store requests than the group
has arrays."""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.logged_s3 import LoggedS3Server, Request
from tests.helpers.mounting import mounted, without_views
from tests.helpers.s3_server import S3Server, free_port, serving

pytestmark = pytest.mark.skipif(
    not os.path.exists("/dev/fuse") or shutil.which("fusermount3") is None,
    reason="needs FUSE (/dev/fuse and fusermount3)",
)
s3fs = pytest.importorskip("s3fs")
zarr = pytest.importorskip("zarr")
numcodecs = pytest.importorskip("numcodecs")
boto3 = pytest.importorskip("boto3")

N_SMALL = 16  # small arrays t00..t15 beside a, b, c and sub/d: 20 arrays in all


@pytest.fixture
def logged_s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[LoggedS3Server]:
    yield from serving(LoggedS3Server(free_port()), monkeypatch)


def write_group(path: Path, zarr_format: int) -> dict[str, np.ndarray]:
    """A group written by zarr-python, with consolidated metadata: path in group -> values."""
    group = zarr.open_group(path, mode="w", zarr_format=zarr_format)
    group.attrs["title"] = "zarrfs S3 group"
    zstd = numcodecs.Zstd(level=1) if zarr_format == 2 else zarr.codecs.ZstdCodec(level=1)
    values: dict[str, np.ndarray] = {}
    a = group.create_array("a", shape=(20, 30), chunks=(8, 16), dtype="<f4", compressors=zstd,
                           fill_value=0)
    values["a"] = np.arange(600, dtype="<f4").reshape(20, 30) / 4 - 3
    a[...] = values["a"]
    a.attrs["units"] = "m"
    # v2: big-endian and Fortran order in the store; v3: big-endian bytes codec.
    order = {"order": "F"} if zarr_format == 2 else {}
    b = group.create_array("b", shape=(7, 5), chunks=(4, 4), dtype=">i4", fill_value=0, **order)
    values["b"] = np.arange(35, dtype=">i4").reshape(7, 5) - 17
    b[...] = values["b"]
    c = group.create_array("c", shape=(50,), chunks=(16,), dtype="u1", compressors=None, fill_value=7)
    values["c"] = np.full(50, 7, dtype="u1")  # chunks 2 and 3 are never written: fill value
    values["c"][:20] = np.arange(20)
    c[:20] = values["c"][:20]
    d = group.create_group("sub").create_array("d", shape=(6, 6), chunks=(3, 3), dtype="<i2",
                                               fill_value=0)
    values["sub/d"] = np.arange(36, dtype="<i2").reshape(6, 6) * 3
    d[...] = values["sub/d"]
    for i in range(N_SMALL):
        t = group.create_array(f"t{i:02d}", shape=(3,), chunks=(3,), dtype="<i8", fill_value=0)
        values[f"t{i:02d}"] = np.arange(i, i + 3, dtype="<i8")
        t[...] = values[f"t{i:02d}"]
    zarr.consolidate_metadata(str(path))
    return values


def upload(server: S3Server, local: Path, prefix: str) -> None:
    client = boto3.client("s3", endpoint_url=server.endpoint_url, region_name="us-east-1")
    for file in sorted(local.rglob("*")):
        if file.is_file():
            key = f"{prefix}/{file.relative_to(local).as_posix()}"
            client.put_object(Bucket=server.bucket, Key=key, Body=file.read_bytes())


def ls_la(path: Path) -> dict[str, os.stat_result]:
    """What `ls -la` asks of the file system: the names, then a stat of each."""
    return {name: os.stat(path / name) for name in os.listdir(path)}


def describe(requests: list[Request]) -> str:
    return "\n".join(f"  {r.method} {r.subject or '/'} -> {r.status}" for r in requests) or "  (none)"


@pytest.mark.filterwarnings("ignore:Consolidated metadata is currently not part")
@pytest.mark.parametrize("zarr_format", [2, 3], ids=["v2", "v3"])
def test_group_mount_reads_only_consolidated_metadata(
    logged_s3: LoggedS3Server, tmp_path: Path, zarr_format: int
) -> None:
    name = f"g{zarr_format}"
    values = write_group(tmp_path / name, zarr_format)
    upload(logged_s3, tmp_path / name, name)
    consolidated = f"{name}/.zmetadata" if zarr_format == 2 else f"{name}/zarr.json"
    metadata_files = [".zarray", ".zattrs"] if zarr_format == 2 else ["zarr.json"]
    children = ["a", "b", "c", "sub", *(f"t{i:02d}" for i in range(N_SMALL))]
    n_arrays = len(values)

    # The oracle: zarr-python reads the group from S3 through its consolidated metadata.
    storage_options = {"endpoint_url": logged_s3.endpoint_url, "key": "testing", "secret": "testing"}
    oracle = zarr.open_consolidated(f"s3://{logged_s3.bucket}/{name}", zarr_format=zarr_format,
                                    storage_options=storage_options)
    for path, expected in values.items():
        assert np.array_equal(oracle[path][...], expected), path

    log = logged_s3.log
    assert log is not None
    log.take()
    options = ["ro", f"endpoint_url={logged_s3.endpoint_url}"]
    with mounted(f"s3://{logged_s3.bucket}/{name}", tmp_path / "mnt", options) as mount:
        root = ls_la(mount.path)
        root_group_files = [".zattrs", ".zgroup", ".zmetadata"] if zarr_format == 2 else ["zarr.json"]
        assert sorted(root) == sorted([*root_group_files, "data.h5", "data.nc", *children]), mount.log()
        for child in children:
            assert stat.S_ISDIR(root[child].st_mode), child
        mounting = log.take()

        listed = {path: ls_la(mount.path / path) for path in ("a", "sub/d")}
        for path, entries in listed.items():
            assert without_views(entries) == sorted(["data", "chunks", *metadata_files]), (path, mount.log())
            assert entries["data"].st_size == values[path].nbytes, path
        listing = log.take()

        # Before any file is opened: the consolidated metadata is the only object fetched.
        fetched = [r for r in mounting + listing if r.fetched_data]
        assert {r.key for r in fetched} == {consolidated}, (
            f"objects fetched by the mount and the listings (only {consolidated} expected):\n"
            + describe(fetched)
        )
        assert len(fetched) <= 2, f"{consolidated} fetched {len(fetched)} times:\n{describe(fetched)}"
        # Mounting and listing the root touch no array (not even a HEAD or a listing)...
        per_node = [r for r in mounting if any(r.subject.startswith(f"{name}/{c}/") for c in children)]
        assert not per_node, "requests for single nodes during mount + ls -la of the root:\n" + describe(
            per_node)
        # ... and take fewer requests than there are arrays.
        assert len(mounting) < n_arrays, (
            f"{len(mounting)} store requests to mount and list a group of {n_arrays} arrays:\n"
            + describe(mounting)
        )

        # Each array's data is what zarr-python wrote (little-endian, C order). (Read with
        # read_bytes, which lets go of the GIL: np.fromfile would hold it in read(2) and keep
        # the moto server, a thread of this process, from answering the daemon.)
        for path, expected in values.items():
            raw = (mount.path / path / "data").read_bytes()
            data = np.frombuffer(raw, dtype=expected.dtype.newbyteorder("<"))
            assert np.array_equal(data.reshape(expected.shape), expected), path
        # Metadata files are the stored bytes.
        client = boto3.client("s3", endpoint_url=logged_s3.endpoint_url, region_name="us-east-1")
        for key in [*root_group_files, *(f"a/{f}" for f in metadata_files)]:
            stored = client.get_object(Bucket=logged_s3.bucket, Key=f"{name}/{key}")["Body"].read()
            assert (mount.path / key).read_bytes() == stored, key
        daemon_log = mount.log()
    assert mount.process.returncode == 0, daemon_log
    assert "Traceback" not in daemon_log, daemon_log
