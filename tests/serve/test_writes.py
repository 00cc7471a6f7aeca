"""Writes through `zarrfs serve -o rw`, with curl, read back with zarr-python: a partial PUT by
Content-Range and a whole PUT stored before they answer, a new ETag after a write (ETags and
other writers: test_freshness.py), a new `.npy` making an array, MKCOL and DELETE of nodes,
LOCK; and what a mount refuses, refused with its status (403, 405, 409, 412, 423), never 500."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import zarr

from tests.helpers.serving import Server, curl, headers_of, served, status_of

SHAPE = (128, 96)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    group = zarr.open_group(tmp_path / "g.zarr", mode="w", zarr_format=3)
    group.create_array("a", shape=SHAPE, chunks=(32, 32), dtype="<i4")[...] = \
        np.arange(np.prod(SHAPE), dtype="<i4").reshape(SHAPE)
    return tmp_path / "g.zarr"


@pytest.fixture
def server(tree: Path, tmp_path: Path) -> Iterator[Server]:
    with served(tree, tmp_path, ["rw"]) as running:
        yield running


def stored(tree: Path, name: str = "a") -> np.ndarray:
    return np.asarray(zarr.open_array(tree / name, mode="r")[...])


@pytest.mark.fast
def test_a_partial_put_is_stored_before_it_answers(server: Server, tree: Path, tmp_path: Path) -> None:
    url = server.url + "a/data"
    before = headers_of(url)["etag"]
    row = np.full(SHAPE[1], -7, dtype="<i4").tobytes()
    (tmp_path / "row").write_bytes(row)
    start = 5 * len(row)
    done = curl("-X", "PUT", "--data-binary", f"@{tmp_path / 'row'}", "-H",
                f"Content-Range: bytes {start}-{start + len(row) - 1}/*", "-w", "%{http_code}", url)
    assert done.stdout.decode().endswith("204"), done
    assert (stored(tree)[5] == -7).all()  # (in the store, by another reader, once answered)
    assert stored(tree)[4][0] == 4 * SHAPE[1]
    after = headers_of(url)["etag"]
    assert after != before
    assert status_of("-H", f"If-None-Match: {before}", url) == 200
    assert curl("-r", f"{start}-{start + 7}", url).stdout == row[:8]


def test_a_whole_put_of_data_and_of_a_new_npy(server: Server, tree: Path, tmp_path: Path) -> None:
    values = np.arange(np.prod(SHAPE), dtype="<i4").reshape(SHAPE)[::-1].copy()
    (tmp_path / "whole").write_bytes(values.tobytes())
    assert status_of("-T", str(tmp_path / "whole"), server.url + "a/data") == 204
    assert np.array_equal(stored(tree), values)
    made = np.linspace(0, 1, 1000, dtype="<f8").reshape(20, 50)
    np.save(tmp_path / "made.npy", made)
    assert status_of("-T", str(tmp_path / "made.npy"), server.url + "made.npy") == 201
    assert np.array_equal(stored(tree, "made"), made)
    assert curl(server.url + "made/data").stdout == made.tobytes()


def test_groups_made_and_nodes_deleted(server: Server, tree: Path) -> None:
    assert status_of("-X", "MKCOL", server.url + "sub/") == 201
    assert zarr.open_group(tree / "sub", mode="r").attrs is not None
    taken = headers_of("-X", "MKCOL", server.url + "sub/")  # (the name is in use)
    assert taken[":status"] == "405" and "MKCOL" not in taken["allow"] and "DELETE" in taken["allow"]
    assert status_of("-X", "MKCOL", server.url + "none/sub/") == 409  # (no parent)
    assert status_of("-X", "MOVE", "-H", f"Destination: {server.url}sub/b", server.url + "a/") in (201, 204)
    assert stored(tree, "sub/b")[1, 1] == SHAPE[1] + 1
    assert status_of("-X", "DELETE", server.url + "sub/") == 204
    assert not (tree / "sub").exists()


@pytest.mark.fast
def test_what_a_mount_refuses_is_refused_with_its_status(server: Server, tree: Path) -> None:
    url = server.url + "a/data"
    assert status_of("-T", "/etc/hostname", server.url + "notes.txt") == 403  # (no plain files)
    assert status_of("-X", "DELETE", url) == 403  # (a file goes with its array)
    assert status_of("-X", "COPY", "-H", f"Destination: {server.url}b/", server.url + "a/") == 403
    assert status_of("-X", "PUT", "--data-binary", "xy", "-H", "Content-Range: bytes 0-1/*",
                     server.url + "a/zarr.json") == 403  # (metadata is written by edits, not bytes)
    assert status_of("-X", "PUT", "--data-binary", "xyz", url) == 409  # (not whole rows)
    posted = headers_of("-X", "POST", "--data-binary", "x", url)
    assert posted[":status"] == "405"
    assert {"PUT", "GET", "LOCK"} <= {method.strip() for method in posted["allow"].split(",")}
    assert status_of("-X", "PUT", "--data-binary", "xy", "-H", "Content-Range: bytes 0-5/*", url) == 400
    assert status_of("-X", "PUT", "--data-binary", "xy", "-H", 'If-Match: "stale"',
                     "-H", "Content-Range: bytes 0-1/*", url) == 412
    assert status_of("-X", "PUT", "--data-binary", "xy", "-H", "Content-Range: bytes 0-1/*",
                     server.url + "a/data.npy") == 403  # (its header's bytes are fixed)
    assert "Traceback" not in server.log()


def test_a_lock_keeps_other_writers_out(server: Server, tree: Path) -> None:
    url = server.url + "a/data"
    body = ('<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope>'
            '<D:locktype><D:write/></D:locktype></D:lockinfo>')
    headers = headers_of("-X", "LOCK", "-H", "Timeout: Second-60", "--data", body, url)
    assert headers[":status"] == "200", headers
    token = headers["lock-token"]
    write = ["-X", "PUT", "--data-binary", "abcd", "-H", "Content-Range: bytes 0-3/*", url]
    assert status_of(*write) == 423
    assert status_of(*write[:-1], "-H", f"If: ({token})", url) == 204
    assert stored(tree).tobytes()[:4] == b"abcd"
    assert status_of("-X", "UNLOCK", "-H", f"Lock-Token: {token}", url) == 204
    assert status_of(*write) == 204
    assert re.fullmatch(r"<opaquelocktoken:[^>]+>", token)
