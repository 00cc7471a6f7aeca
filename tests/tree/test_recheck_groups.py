"""Close-to-open for a group's own metadata: another writer (zarr-python) changes a mounted
group's attributes; the next open of the group's metadata file shows the document as stored,
and its extended attributes follow (a local store, S3, v3 and v2). A group known from
consolidated metadata follows that document, as zarr-python does.

Also what it costs: an open of the group's metadata file asks the store once."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import zarr

from tests.helpers.mounting import MountFactory
from tests.helpers.s3_server import S3Server
from tests.helpers.scale_arrays import RequestLog

pytest_plugins = ["tests.helpers.recheck_places"]  # (the fixtures `where` and `s3_server`)

pytestmark = pytest.mark.skipif(
    not os.path.exists("/dev/fuse") or shutil.which("fusermount3") is None,
    reason="needs FUSE (/dev/fuse and fusermount3)",
)


def attributes_xattr(path: Path) -> dict[str, Any]:
    shown = subprocess.run(["getfattr", "--only-values", "-n", "user.zarr.attributes", str(path)],
                           check=True, capture_output=True).stdout
    return dict(json.loads(shown))


@pytest.mark.parametrize("zarr_format", [3, 2])
def test_a_groups_attributes_changed_by_another_writer_show_at_the_next_open(
        where: tuple[str, dict[str, Any], list[str]], mount_array: MountFactory, zarr_format: int) -> None:
    url, reach, options = where
    group = zarr.open_group(url, mode="w", zarr_format=zarr_format, **reach)
    group.attrs["v"] = 1
    group.create_group("sub").attrs["w"] = 1
    mount = mount_array(url, options)
    document = "zarr.json" if zarr_format == 3 else ".zattrs"
    assert json.loads((mount.path / document).read_bytes())["attributes" if zarr_format == 3 else "v"] \
        in ({"v": 1}, 1)
    assert attributes_xattr(mount.path) == {"v": 1}
    assert attributes_xattr(mount.path / "sub") == {"w": 1}

    zarr.open_group(url, mode="r+", **reach).attrs["v"] = 2
    zarr.open_group(f"{url}/sub", mode="r+", **reach).attrs.update({"w": 2, "x": "new"})

    stored = json.loads((mount.path / document).read_bytes())
    assert (stored["attributes"] if zarr_format == 3 else stored) == {"v": 2}
    assert attributes_xattr(mount.path) == {"v": 2}
    assert json.loads((mount.path / "sub" / document).read_bytes())  # (its own open: its own recheck)
    assert attributes_xattr(mount.path / "sub") == {"w": 2, "x": "new"}
    assert attributes_xattr(mount.path) == {"v": 2}  # (a subgroup's recheck leaves its parent as it is)


def test_a_consolidated_v3_group_shows_its_new_attributes(tmp_path: Path, mount_array: MountFactory) -> None:
    url = str(tmp_path / "g.zarr")
    zarr.open_group(url, mode="w").attrs["v"] = 1
    zarr.consolidate_metadata(url)
    mount = mount_array(url, [])
    assert attributes_xattr(mount.path) == {"v": 1}
    zarr.open_group(url, mode="r+").attrs["v"] = 2
    assert json.loads((mount.path / "zarr.json").read_bytes())["attributes"] == {"v": 2}
    assert attributes_xattr(mount.path) == dict(zarr.open_group(url, mode="r").attrs) == {"v": 2}


def test_a_group_below_consolidated_metadata_follows_it_as_zarr_python_does(
        tmp_path: Path, mount_array: MountFactory) -> None:
    url = str(tmp_path / "g.zarr")
    zarr.open_group(url, mode="w", zarr_format=2).create_group("sub").attrs["w"] = 1
    zarr.consolidate_metadata(url)
    mount = mount_array(url, [])

    def shown() -> tuple[dict[str, Any], dict[str, Any]]:
        through_mount = json.loads((mount.path / "sub" / ".zattrs").read_bytes())
        assert attributes_xattr(mount.path / "sub") == through_mount
        return through_mount, dict(zarr.open_group(url, mode="r", zarr_format=2)["sub"].attrs)

    assert shown() == ({"w": 1}, {"w": 1})
    zarr.open_group(f"{url}/sub", mode="r+", zarr_format=2, use_consolidated=False).attrs["w"] = 2
    assert shown() == ({"w": 1}, {"w": 1})  # (the consolidated metadata is not yet written again)
    zarr.consolidate_metadata(url)
    assert shown() == ({"w": 2}, {"w": 2})


def test_an_open_of_a_groups_metadata_asks_the_store_once(s3_server: S3Server, tmp_path: Path,
                                                          mount_array: MountFactory) -> None:
    url = f"s3://{s3_server.bucket}/g.zarr"
    reach = {"storage_options": s3_server.s3fs_options()}
    zarr.open_group(url, mode="w", **reach).create_group("sub").attrs["w"] = 1
    log = RequestLog(tmp_path / "requests.log")
    mount = mount_array(url, [f"endpoint_url={s3_server.endpoint_url}"], env=log.env)
    assert "sub" in os.listdir(mount.path)
    log.take()
    for _ in range(2):
        for group in (mount.path, mount.path / "sub"):
            assert json.loads((group / "zarr.json").read_bytes())["node_type"] == "group"
        requests = log.take()
        asked = sorted(r.key.rpartition("g.zarr/")[2] for r in requests if r.key.endswith("zarr.json"))
        assert asked == ["sub/zarr.json", "zarr.json"], requests.summary()
