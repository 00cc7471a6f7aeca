"""Zarr hierarchies mounted over HTTP from a real server that lists nothing (as CDNs and bucket
website endpoints serve public OME-Zarr and xarray data): children are found through
consolidated metadata, OME-Zarr metadata (levels, labels) and by name, a failed listing is no
error, a name that is not there is asked for once a while, and a write mount falls back to
read-only. The same server with listings still works as before.

Oracles: zarr-python and ome-zarr reading the served directory locally. `tests/helpers/http_server.py`
is the server (byte ranges, 403 or 404 for directory URLs, every request recorded).
"""

from __future__ import annotations

import errno
import json
import os
import warnings
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr
from ome_zarr.io import parse_url
from ome_zarr.reader import Reader
from ome_zarr.writer import write_image, write_labels, write_plate_metadata, write_well_metadata

from tests.helpers.http_server import Server, serving
from tests.helpers.mounting import without_views
from zarrfs.formats import GroupChildren, discover
from zarrfs.formats.children import MISS_SECONDS
from zarrfs.store import Store

ServerFactory = Callable[..., Server]
# (a group's files)
METADATA = {2: {".zgroup", ".zattrs", "data.nc", "data.h5"}, 3: {"zarr.json", "data.nc", "data.h5"}}
ARRAY_METADATA = {2: {".zarray", ".zattrs"}, 3: {"zarr.json"}}
PYRAMID = {"data.ome.tif", "data.tif"}  # (beside the levels of an OME-Zarr image)


@pytest.fixture
def http_server() -> Iterator[ServerFactory]:
    """http_server(directory, listings=False, directory_status=404) -> a running Server,
    stopped at the end of the test."""
    with ExitStack() as stack:
        yield lambda directory, **kwargs: stack.enter_context(serving(directory, **kwargs))


def _assert_data(path: Path, expected: np.ndarray) -> None:
    """`path` holds `expected` flat, C order, little-endian (what `cat` reads)."""
    dtype = expected.dtype.newbyteorder("<")
    data = path.read_bytes()
    assert len(data) == expected.size * dtype.itemsize
    assert np.array_equal(np.frombuffer(data, dtype).reshape(expected.shape), expected.astype(dtype))


def _assert_enoent(path: Path) -> None:
    with pytest.raises(OSError) as raised:
        os.stat(path)
    assert raised.value.errno == errno.ENOENT, (path, raised.value)


def _ls(path: Path) -> set[str]:
    return set(os.listdir(path))


def _array_entries(zarr_format: int) -> list[str]:
    return sorted(ARRAY_METADATA[zarr_format] | {"chunks", "data"})


def _clean_log(log: str) -> None:
    assert "Traceback" not in log and "ERROR" not in log, log


# -- OME-Zarr ------------------------------------------------------------------------------------


def _ome_image(store: Path, zarr_format: int) -> tuple[list[str], list[str]]:
    """A 2-channel image with a `cells` label image: OME-Zarr 0.4 in a v2 group, 0.5 in a v3
    one (ome-zarr writes what the group's format calls for). Its level and label level paths."""
    image = (np.arange(2 * 64 * 80, dtype=np.uint32) * 2654435761 % 251).astype(np.uint8).reshape(2, 64, 80)
    labels = (np.arange(64 * 80) % 5).astype(np.uint8).reshape(1, 64, 80)
    root = zarr.open_group(store, mode="w", zarr_format=zarr_format)  # type: ignore[arg-type]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        write_image(image, root, axes="cyx", storage_options={"chunks": (1, 32, 32)})
        write_labels(labels, root, name="cells", axes="cyx")
    block = _ome_metadata(store, zarr_format)
    assert block["version"].startswith("0.4" if zarr_format == 2 else "0.5")
    levels = [d["path"] for d in block["multiscales"][0]["datasets"]]
    label_block = _ome_metadata(store / "labels" / "cells", zarr_format)
    label_levels = [d["path"] for d in label_block["multiscales"][0]["datasets"]]
    pyramid = next(iter(Reader(parse_url(str(store)))())).data  # ome-zarr reads the same levels
    assert len(pyramid) == len(levels) == 5
    return levels, label_levels


def _ome_metadata(group: Path, zarr_format: int) -> Any:
    """0.4: the group's attributes; 0.5: their "ome" member (with the version in it)."""
    if zarr_format == 2:
        attributes = json.loads((group / ".zattrs").read_bytes())
        return {**attributes, "version": attributes["multiscales"][0]["version"]}
    return json.loads((group / "zarr.json").read_bytes())["attributes"]["ome"]


def _oracle(path: Path) -> np.ndarray:
    return np.asarray(zarr.open_array(path, mode="r")[...])


@pytest.mark.parametrize(("zarr_format", "directory_status"), [(2, 404), (3, 403), (3, 404)],
                         ids=["ome-0.4-404", "ome-0.5-403", "ome-0.5-404"])
def test_ome_zarr_image_without_listings(zarr_format: int, directory_status: int, tmp_path: Path,
                                         mount_array: Any, http_server: ServerFactory) -> None:
    store = tmp_path / "image.ome.zarr"
    levels, label_levels = _ome_image(store, zarr_format)
    server = http_server(tmp_path, directory_status=directory_status)
    mount = mount_array(f"{server.url}/image.ome.zarr", ["ro"])

    assert _ls(mount.path) == METADATA[zarr_format] | PYRAMID | {*levels, "labels"}
    for level in levels:
        assert without_views(os.listdir(mount.path / level)) == _array_entries(zarr_format)
        _assert_data(mount.path / level / "data", _oracle(store / level))
    assert _ls(mount.path / "labels") == METADATA[zarr_format] | {"cells"}
    assert _ls(mount.path / "labels" / "cells") == METADATA[zarr_format] | PYRAMID | set(label_levels)
    for level in label_levels:
        _assert_data(mount.path / "labels" / "cells" / level / "data",
                     _oracle(store / "labels" / "cells" / level))
    assert server.count("/image.ome.zarr/nope") == 0
    _assert_enoent(mount.path / "nope")
    _clean_log(mount.log())


def test_ome_zarr_listed_by_name_before_listing(tmp_path: Path, mount_array: Any,
                                                http_server: ServerFactory) -> None:
    """A level looked up before its group is listed is found by name, and is not asked for
    again when the group is listed."""
    store = tmp_path / "image.ome.zarr"
    levels, _ = _ome_image(store, 3)
    server = http_server(tmp_path)
    mount = mount_array(f"{server.url}/image.ome.zarr", ["ro"])
    _assert_data(mount.path / levels[1] / "data", _oracle(store / levels[1]))
    before = server.count(f"/image.ome.zarr/{levels[1]}/zarr.json")
    assert _ls(mount.path) == {"zarr.json", "data.nc", "data.h5", *PYRAMID, *levels, "labels"}
    assert server.count(f"/image.ome.zarr/{levels[1]}/zarr.json") == before


@pytest.mark.fast
def test_ome_zarr_plate_without_listings(tmp_path: Path, mount_array: Any,
                                         http_server: ServerFactory) -> None:
    """A plate's rows, columns and fields are named two and one levels up (`plate.wells[].path`
    is "B/3", `well.images[].path` "0"): each level is found from the metadata above it."""
    store = tmp_path / "plate.ome.zarr"
    root = zarr.open_group(store, mode="w", zarr_format=3)
    wells = ["A/1", "B/3"]
    write_plate_metadata(root, ["A", "B"], ["1", "2", "3"], wells)
    for well in wells:
        group = root.require_group(well)
        write_well_metadata(group, ["0"])
        image = np.full((1, 16, 16), ord(well[0]) + int(well[-1]), np.uint8)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            write_image(image, group.require_group("0"), axes="cyx", scale_factors=(2,))
    levels = [d["path"] for d in _ome_metadata(store / "A" / "1" / "0", 3)["multiscales"][0]["datasets"]]
    server = http_server(tmp_path)
    mount = mount_array(f"{server.url}/plate.ome.zarr", ["ro"])
    assert _ls(mount.path) == {"zarr.json", "data.nc", "data.h5", "A", "B"}
    assert _ls(mount.path / "A") == {"zarr.json", "data.nc", "data.h5", "1"}
    assert _ls(mount.path / "B") == {"zarr.json", "data.nc", "data.h5", "3"}
    assert _ls(mount.path / "B" / "3") == {"zarr.json", "data.nc", "data.h5", "0"}
    assert _ls(mount.path / "B" / "3" / "0") == {"zarr.json", "data.nc", "data.h5", *PYRAMID, *levels}
    for well in wells:
        _assert_data(mount.path / well / "0" / levels[0] / "data", _oracle(store / well / "0" / levels[0]))
    _clean_log(mount.log())


def test_a_miss_is_asked_again_once_its_time_is_up(tmp_path: Path, http_server: ServerFactory) -> None:
    """Children looked up through the store the mount uses, on a clock the test moves."""
    _group(tmp_path / "group.zarr", 3)
    server = http_server(tmp_path)
    store = Store.open(f"{server.url}/group.zarr")
    root = discover(store.get, "")
    assert root is not None
    now = [0.0]
    children = GroupChildren(root, store.get, store.without_retries().list_dirs, clock=lambda: now[0])
    assert children.all() == {}  # listing refused: nothing known, no error
    assert children.find("nope") is None and server.count("/group.zarr/nope/") == 1
    now[0] = MISS_SECONDS - 1
    assert children.find("nope") is None and server.count("/group.zarr/nope/") == 1
    assert children.all() == {} and server.count("/group.zarr/nope/") == 1
    found = children.find("sub")
    assert found is not None and found.kind == "group" and set(children.all()) == {"sub"}
    now[0] = MISS_SECONDS
    assert children.find("nope") is None and server.count("/group.zarr/nope/") == 2
    listings = server.paths().count("/group.zarr")
    now[0] = 2 * MISS_SECONDS
    children.all()  # a failed listing is tried again once its time is up
    assert server.paths().count("/group.zarr") == listings + 1


# -- groups without consolidated metadata: children by name ----------------------------------


def _group(store: Path, zarr_format: int, consolidated: bool = False) -> dict[str, np.ndarray]:
    """/ -> top (int16), sub -> arr (float32 2-D), sub/deeper -> vec; the arrays by path."""
    root = zarr.open_group(store, mode="w", zarr_format=zarr_format)  # type: ignore[arg-type]
    arrays = {
        "top": np.arange(-5, 7, dtype="<i2"),
        "sub/arr": (np.arange(30 * 20, dtype="<f4") / 7).reshape(30, 20),
        "sub/deeper/vec": np.arange(50, dtype="<u8") * 3,
    }
    for path, values in arrays.items():
        created = root.create_array(path, shape=values.shape, dtype=values.dtype,
                                    chunks=tuple(max(1, n // 3) for n in values.shape))
        created[...] = values
    if consolidated:
        zarr.consolidate_metadata(store, zarr_format=zarr_format)  # type: ignore[arg-type]
    return {path: _oracle(store / path) for path in arrays}


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_unconsolidated_group_reached_by_name(zarr_format: int, tmp_path: Path, mount_array: Any,
                                              http_server: ServerFactory) -> None:
    store = tmp_path / "group.zarr"
    expected = _group(store, zarr_format)
    server = http_server(tmp_path)
    mount = mount_array(f"{server.url}/group.zarr", ["ro"])  # a root group without .zmetadata

    assert _ls(mount.path) == METADATA[zarr_format]  # nothing known yet: no error either
    _assert_data(mount.path / "sub" / "arr" / "data", expected["sub/arr"])
    assert _ls(mount.path) == METADATA[zarr_format] | {"sub"}
    assert _ls(mount.path / "sub") == METADATA[zarr_format] | {"arr"}
    assert without_views(os.listdir(mount.path / "sub" / "arr")) == _array_entries(zarr_format)
    _assert_data(mount.path / "top" / "data", expected["top"])
    _assert_data(mount.path / "sub" / "deeper" / "vec" / "data", expected["sub/deeper/vec"])
    assert _ls(mount.path) == METADATA[zarr_format] | {"sub", "top"}
    assert _ls(mount.path / "sub") == METADATA[zarr_format] | {"arr", "deeper"}
    metadata = mount.path / "sub" / "arr" / (".zarray" if zarr_format == 2 else "zarr.json")
    assert json.loads(metadata.read_bytes())["shape"] == [30, 20]
    _clean_log(mount.log())


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_consolidated_group_lists_fully(zarr_format: int, tmp_path: Path, mount_array: Any,
                                        http_server: ServerFactory) -> None:
    store = tmp_path / "group.zarr"
    expected = _group(store, zarr_format, consolidated=True)
    server = http_server(tmp_path, directory_status=403)
    mount = mount_array(f"{server.url}/group.zarr", ["ro"])
    consolidated = {".zmetadata"} if zarr_format == 2 else set()
    assert _ls(mount.path) == METADATA[zarr_format] | consolidated | {"top", "sub"}
    assert _ls(mount.path / "sub") == METADATA[zarr_format] | {"arr", "deeper"}
    assert _ls(mount.path / "sub" / "deeper") == METADATA[zarr_format] | {"vec"}
    for path, values in expected.items():
        _assert_data(mount.path / path / "data", values)
    _assert_enoent(mount.path / "sub" / "nope")
    assert server.count("/group.zarr/sub/nope") == 0  # consolidated metadata names every child
    _clean_log(mount.log())


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_a_missing_name_is_enoent_and_asked_for_once(zarr_format: int, tmp_path: Path, mount_array: Any,
                                                     http_server: ServerFactory) -> None:
    store = tmp_path / "group.zarr"
    _group(store, zarr_format)
    server = http_server(tmp_path)
    mount = mount_array(f"{server.url}/group.zarr", ["ro"])
    _assert_enoent(mount.path / "nope")
    first = server.count("/group.zarr/nope/")
    # v3: NAME/zarr.json; v2: NAME/.zarray, .zgroup and v1's NAME/meta.
    assert first == (1 if zarr_format == 3 else 3), server.paths()
    # An ENOENT reply is not cached by the kernel: these lookups reach the daemon again.
    for _ in range(3):
        _assert_enoent(mount.path / "nope")
    os.listdir(mount.path)
    assert server.count("/group.zarr/nope/") == first
    unlikely = (".git", ".nope.swp", "nope~", "#nope#", "__pycache__")
    for name in unlikely:
        _assert_enoent(mount.path / name)
    asked = tuple(f"/group.zarr/{name}" for name in unlikely)
    assert not [path for path in server.paths() if path.startswith(asked)]
    _clean_log(mount.log())


def test_a_write_mount_over_http_is_read_only(tmp_path: Path, mount_array: Any,
                                              http_server: ServerFactory) -> None:
    store = tmp_path / "group.zarr"
    expected = _group(store, 3)
    server = http_server(tmp_path)
    mount = mount_array(f"{server.url}/group.zarr", ["rw"])
    assert "(read-only)" in mount.wait_for_log("cannot be written")
    with pytest.raises(OSError) as raised, open(mount.path / "top" / "data", "r+b") as f:
        f.write(b"\0\0")
    assert raised.value.errno == errno.EROFS
    _assert_data(mount.path / "top" / "data", expected["top"])
    assert not [method for method, _ in server.requests if method not in ("GET", "HEAD")]


# -- the same server with listings ---------------------------------------------------------------


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_a_server_with_listings_lists_everything(zarr_format: int, tmp_path: Path, mount_array: Any,
                                                 http_server: ServerFactory) -> None:
    store = tmp_path / "group.zarr"
    expected = _group(store, zarr_format)
    server = http_server(tmp_path, listings=True)
    mount = mount_array(f"{server.url}/group.zarr", ["ro"])
    assert _ls(mount.path) == METADATA[zarr_format] | {"top", "sub"}  # before any lookup
    assert _ls(mount.path / "sub") == METADATA[zarr_format] | {"arr", "deeper"}
    for path, values in expected.items():
        _assert_data(mount.path / path / "data", values)
    _assert_enoent(mount.path / "nope")
    assert server.count("/group.zarr/nope") == 0  # a listing names every child
    _clean_log(mount.log())
