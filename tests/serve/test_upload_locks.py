"""What Finder and Windows do when they write through `zarrfs serve -o rw`, and locks: Finder's
`._NAME` and `.DS_Store` are taken, served back and listed, and never reach the store;
Windows' LOCK of a new `NAME.npy`, PUT, UNLOCK makes the array; a LOCK of a new name whose
PUT is refused leaves the name free for the next client; a lock on `data` keeps writes out of
`data.npy` and the chunk files (423) unless its token is submitted."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import zarr

from tests.helpers.serving import Server, curl, group_of_one, served, status_of
from tests.helpers.webdav_requests import lock

SHAPE = (64, 32)
VALUES = np.arange(np.prod(SHAPE), dtype="<i4").reshape(SHAPE)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return group_of_one(tmp_path, "a", VALUES, (32, 32))


@pytest.fixture
def server(tree: Path, tmp_path: Path) -> Iterator[Server]:
    with served(tree, tmp_path, ["rw"]) as running:
        yield running


def listed(url: str) -> str:
    return curl("-X", "PROPFIND", "-H", "Depth: 1", url).stdout.decode()


@pytest.mark.fast
def test_finders_files_are_kept_apart_from_the_store(server: Server, tree: Path, tmp_path: Path) -> None:
    double = os.urandom(4096)
    (tmp_path / "double").write_bytes(double)
    chunked = ["-H", "Transfer-Encoding: chunked", "-H", f"X-Expected-Entity-Length: {len(double)}"]
    assert status_of("-T", str(tmp_path / "double"), *chunked, server.url + "a/._data") == 201
    assert status_of("-T", str(tmp_path / "double"), server.url + ".DS_Store") == 201
    assert curl(server.url + "a/._data").stdout == double
    assert curl(server.url + ".DS_Store").stdout == double
    assert "/a/._data</" in listed(server.url + "a/") and "/.DS_Store</" in listed(server.url)
    assert status_of("-X", "PROPFIND", "-H", "Depth: 0", server.url + "a/._data") == 207
    found = [name for _, dirs, files in os.walk(tree) for name in [*dirs, *files] if name.startswith(".")]
    assert found == []
    assert status_of("-X", "DELETE", server.url + "a/._data") == 204
    assert status_of(server.url + "a/._data") == 404
    assert "._data" not in listed(server.url + "a/")
    (tmp_path / "big").write_bytes(bytes(2 << 20))
    assert status_of("-T", str(tmp_path / "big"), server.url + "._big") == 507
    assert status_of("-T", str(tmp_path / "double"), server.url + "notes.txt") == 403  # (still)


@pytest.mark.fast
def test_finders_files_go_with_their_array(server: Server, tree: Path, tmp_path: Path) -> None:
    """Moved with the array they sit in, gone with it when it is deleted: none shows again
    beside a new array of the old name."""
    (tmp_path / "double").write_bytes(b"AppleDouble")
    assert status_of("-T", str(tmp_path / "double"), server.url + "a/._data") == 201
    assert status_of("-X", "MOVE", "-H", f"Destination: {server.url}b", server.url + "a/") in (201, 204)
    assert curl(server.url + "b/._data").stdout == b"AppleDouble"
    assert status_of(server.url + "a/._data") == 404
    assert status_of("-X", "DELETE", server.url + "b/") == 204
    assert status_of(server.url + "b/._data") == 404
    assert status_of("-X", "MKCOL", server.url + "b/") == 201
    assert "._data" not in listed(server.url + "b/")


@pytest.mark.fast
def test_windows_lock_put_unlock_makes_an_array(server: Server, tree: Path, tmp_path: Path) -> None:
    url = server.url + "new.npy"
    np.save(tmp_path / "new.npy", VALUES * 3)
    status, token = lock(url)
    assert status == 201
    assert status_of("-T", str(tmp_path / "new.npy"), url) == 423  # (without the token)
    assert status_of("-T", str(tmp_path / "new.npy"), "-H", f"If: ({token})", url) == 204  # (LOCK made it)
    assert status_of("-X", "UNLOCK", "-H", f"Lock-Token: {token}", url) == 204
    assert np.array_equal(zarr.open_array(tree / "new", mode="r")[...], VALUES * 3)


@pytest.mark.fast
def test_a_refused_upload_frees_its_name(server: Server, tree: Path, tmp_path: Path) -> None:
    url = server.url + "new.npy"
    status, token = lock(url)
    assert status == 201
    refused = ["-X", "PUT", "--data-binary", "not a .npy file at all", "-H", f"If: ({token})", url]
    assert status_of(*refused) == 409
    assert "new.npy" not in listed(server.url)
    status, token = lock(url)  # (another client: the name and its lock are free)
    assert status == 201
    np.save(tmp_path / "new.npy", VALUES)
    assert status_of("-T", str(tmp_path / "new.npy"), "-H", f"If: ({token})", url) == 204
    assert np.array_equal(zarr.open_array(tree / "new", mode="r")[...], VALUES)


@pytest.mark.fast
def test_a_lock_on_data_covers_the_arrays_other_files(server: Server, tree: Path, tmp_path: Path) -> None:
    data = server.url + "a/data"
    status, token = lock(data)
    assert status == 200
    np.save(tmp_path / "a.npy", VALUES + 5)
    chunk = server.url + "a/chunks/c/1/0"
    (tmp_path / "chunk").write_bytes(curl(chunk).stdout)
    submitted = ["-H", f"If: <{data}> ({token})"]  # (tagged: the lock is data's)
    assert status_of("-T", str(tmp_path / "a.npy"), server.url + "a/data.npy") == 423
    assert status_of("-T", str(tmp_path / "chunk"), chunk) == 423
    assert np.array_equal(zarr.open_array(tree / "a", mode="r")[...], VALUES)
    assert status_of("-T", str(tmp_path / "chunk"), *submitted, chunk) == 204
    assert status_of("-T", str(tmp_path / "a.npy"), *submitted, server.url + "a/data.npy") == 204
    assert np.array_equal(zarr.open_array(tree / "a", mode="r")[...], VALUES + 5)
    assert status_of("-X", "UNLOCK", "-H", f"Lock-Token: {token}", data) == 204
    assert status_of("-T", str(tmp_path / "chunk"), chunk) == 204
