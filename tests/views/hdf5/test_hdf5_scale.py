"""data.h5 at scale: its stat and open cost no listing, and a reader of one chunk of an array of
10^6 chunks pays about what a reader of one chunk of an array of 16 pays: the leaf of the
B-tree indexing the chunk (a look at the stored sizes of its 512 chunks, one scan of their
row's directory; the nodes above it cost no request), then the chunk. The twins' chunks are
zlib streams, which pass through as stored (zstd ones are served decoded, which costs the
leaf nothing). Counted with the daemon's request log."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import h5py
import hdf5plugin  # noqa: F401  (the zstd filter)
import numpy as np
import pytest

from tests.helpers.mounting import Mount, MountFactory
from tests.helpers.scale_arrays import ZLIB, RequestLog, values, write_twin
from zarrfs.views.hdf5.structures import NODE_ENTRIES as PAGE  # (chunks a leaf indexes)

CHUNK = (16, 16)
STORED = [(0, 0), (500, 700), (999, 999)]
FEW = 16  # (metadata, a directory or two)


@pytest.fixture(scope="module")
def arrays(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("h5scale")
    return {"small": write_twin(root / "small.zarr", (4, 4), CHUNK, compression=ZLIB),
            "huge": write_twin(root / "huge.zarr", (1000, 1000), CHUNK, stored=STORED, compression=ZLIB),
            "giant": write_twin(root / "giant.zarr", (10_000, 10_000), CHUNK, stored=STORED)}


@pytest.fixture
def counted(tmp_path: Path, mount_array: MountFactory) -> Iterator[tuple[RequestLog, MountFactory]]:
    log = RequestLog(tmp_path / "requests.log")

    def mount(source: Path) -> Mount:
        return mount_array(source, ["ro"], env=log.env)

    yield log, mount


@pytest.mark.parametrize(("name", "chunk"), [("small", (2, 3)), ("huge", (500, 700))])
def test_one_chunk_costs_its_page_and_itself(arrays: dict[str, Path],
                                            counted: tuple[RequestLog, MountFactory], name: str,
                                            chunk: tuple[int, int]) -> None:
    log, mount = counted
    mnt = mount(arrays[name])
    log.take()
    os.stat(mnt.path / "data.h5")
    stat = log.take()
    assert stat.listed() == 0 and stat.count() <= FEW, stat.summary()
    with h5py.File(mnt.path / "data.h5", "r") as f:
        opened = log.take()
        assert opened.listed() == 0 and opened.read() == 0 and opened.count() <= FEW, opened.summary()
        start = (chunk[0] * CHUNK[0], chunk[1] * CHUNK[1])
        stop = (start[0] + CHUNK[0], start[1] + CHUNK[1])
        got = f["data"][start[0]:stop[0], start[1]:stop[1]]
    assert np.array_equal(got, values(start, stop))
    requests = log.take()
    assert len(requests.of_kind("list")) <= 1 and requests.listed() <= PAGE, requests.summary()
    assert requests.read() == 1 and len(requests) <= FEW, requests.summary()


def test_no_data_h5_past_its_chunk_limit(arrays: dict[str, Path],
                                         counted: tuple[RequestLog, MountFactory]) -> None:
    """10^8 chunks: past 2^26 there is no data.h5 (array_file.MAX_CHUNKS), the other views
    are there."""
    _, mount = counted
    names = os.listdir(mount(arrays["giant"]).path)
    assert "data.h5" not in names and "data.npy" in names


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A group of the 10^6-chunk sparse array beside two small ones."""
    root = tmp_path_factory.mktemp("h5group") / "g.zarr"
    root.mkdir()
    (root / "zarr.json").write_text('{"zarr_format": 3, "node_type": "group", "attributes": {"title": "t"}}')
    write_twin(root / "huge", (1000, 1000), CHUNK, stored=STORED, compression=ZLIB)
    write_twin(root / "small", (4, 4), CHUNK, compression=ZLIB)
    write_twin(root / "other", (4, 4), CHUNK, compression=ZLIB)
    return root


def test_a_group_file_costs_no_listing_of_its_arrays(group: Path,
                                                     counted: tuple[RequestLog, MountFactory]) -> None:
    """The group's data.h5 beside an array of 10^6 chunks: its stat and open list no chunk
    (the group's own listing names its three arrays), and one chunk of the big array costs
    its index page and itself, as in the array's own file."""
    log, mount = counted
    mnt = mount(group)
    log.take()
    os.stat(mnt.path / "data.h5")
    stat = log.take()
    assert stat.listed() <= FEW and stat.read() <= FEW, stat.summary()
    with h5py.File(mnt.path / "data.h5", "r") as f:
        opened = log.take()
        assert opened.listed() <= FEW and opened.count() <= FEW, opened.summary()
        start, stop = (500 * CHUNK[0], 700 * CHUNK[1]), (501 * CHUNK[0], 701 * CHUNK[1])
        got = f["huge"][start[0]:stop[0], start[1]:stop[1]]
        requests = log.take()
        assert np.array_equal(got, values(start, stop))
        assert len(requests.of_kind("list")) <= 1 and requests.listed() <= PAGE, requests.summary()
        assert requests.read() == 1 and len(requests) <= FEW, requests.summary()
        assert np.array_equal(f["small"][...], values((0, 0), (64, 64)))
