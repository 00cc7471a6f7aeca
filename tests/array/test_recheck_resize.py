"""Another writer's resize, seen through a mount with `-o recheck=open` (the default): after a
reopen, st_size, the chunk listing and the metadata file follow a grown or shrunk array;
metadata changed beyond the shape is ignored and logged."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers.mounting import Mount
from tests.helpers.recheck_mounts import DTYPE, ITEM, VALUES, Backend, block, chunk, data, npy

pytestmark = pytest.mark.skipif(
    not os.path.exists("/dev/fuse") or shutil.which("fusermount3") is None,
    reason="needs FUSE (/dev/fuse and fusermount3)",
)


def listing(mount: Mount, *parts: str) -> list[str]:
    return sorted(os.listdir(mount.path.joinpath("chunks", "c", *parts)), key=int)


# -- 2. a resize by another writer -----------------------------------------------------------


def test_outside_resize_is_seen_after_reopen(backend: Backend, mount_array: Any) -> None:
    backend.create("r")
    mount = mount_array(backend.url("r"), backend.mount_options)
    assert np.array_equal(data(mount), VALUES)
    assert np.array_equal(data(mount), VALUES)
    assert listing(mount) == ["0", "1", "2", "3"]
    writer = backend.writer("r")
    writer.resize((48, 40))
    writer[32:48, :] = 3
    writer[:32, 32:40] = 5
    expected = np.zeros((48, 40), DTYPE)
    expected[:32, :32] = VALUES
    expected[32:48, :] = 3
    expected[:32, 32:40] = 5

    with open(mount.data, "rb", buffering=0) as f:  # the open takes the new shape
        assert os.fstat(f.fileno()).st_size == expected.nbytes
        assert np.array_equal(np.frombuffer(f.read(), DTYPE).reshape(48, 40), expected)
    assert os.stat(mount.data).st_size == expected.nbytes
    with open(mount.data, "rb", buffering=0) as f:  # past the old end
        assert os.pread(f.fileno(), 40 * ITEM, 40 * 40 * ITEM) == expected[40].tobytes()
    assert listing(mount) == ["0", "1", "2", "3", "4", "5"]
    assert listing(mount, "5") == ["0", "1", "2", "3", "4"]
    assert np.array_equal(chunk(mount, 5, 4), block(expected, 5, 4))
    assert np.array_equal(chunk(mount, 1, 4), block(expected, 1, 4))
    assert np.array_equal(npy(mount), expected)
    assert json.loads((mount.path / "zarr.json").read_text())["shape"] == [48, 40]


def test_outside_shrink_is_seen_after_reopen(local: Backend, mount_array: Any) -> None:
    local.create("r")
    mount = mount_array(local.url("r"))
    assert np.array_equal(data(mount), VALUES)
    assert np.array_equal(chunk(mount, 3, 3), block(VALUES, 3, 3))
    local.writer("r").resize((16, 32))
    assert np.array_equal(data(mount, (16, 32)), VALUES[:16])
    assert os.stat(mount.data).st_size == 16 * 32 * ITEM
    assert listing(mount) == ["0", "1"]
    assert not mount.chunk("c/3/3").exists()


def test_metadata_changed_beyond_the_shape_is_ignored_and_logged(local: Backend,
                                                                  mount_array: Any) -> None:
    """Attributes changed: nothing to see in the data. Shape and fill value changed: the old
    metadata is kept (remount to see it), with a warning, and the data still reads."""
    local.create("m")
    mount = mount_array(local.url("m"))
    assert np.array_equal(data(mount), VALUES)
    local.writer("m").attrs["note"] = "changed"
    assert np.array_equal(data(mount), VALUES)
    assert "remount" not in mount.log()
    path = Path(local.url("m")) / "zarr.json"
    document = json.loads(path.read_text())
    document["shape"] = [40, 32]
    document["fill_value"] = 9
    path.write_text(json.dumps(document))
    assert np.array_equal(data(mount), VALUES)
    assert os.stat(mount.data).st_size == VALUES.nbytes
    assert "remount to see it" in mount.log()
