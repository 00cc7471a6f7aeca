"""What `zarrfs serve` shows of changes, asked with curl and Python's http.client (a client
that keeps its connection), changed through the server and by zarr-python writing the store:

- ETags per version of a file: a write to one array gives new ETags to that array's files
  only (`data`, its views, its chunk files; its metadata file when its bytes change), and
  so does another writer's change; the other arrays' files keep theirs, so If-None-Match and
  If-Range answer as the bytes are.
- Close-to-open as a mount keeps it (`-o recheck=`): a request is an open of its file unless
  it continues its connection's reading of it (`zarrfs.serve.reading`): a change made by
  another writer between two GETs is seen by the second when it is an open (a whole GET, a
  new connection, or a range GET after a pause), while a range GET continuing a connection's
  reading costs no store request; `recheck=SECONDS` sees it within SECONDS even then, and
  `recheck=never` not at all."""

from __future__ import annotations

import contextlib
import http.client
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import pytest
import zarr

from tests.helpers.serving import Server, curl, headers_of, served, status_of
from zarrfs.serve.reading import CONTINUED_WITHIN

SHAPE = (64, 48)
VALUES = np.arange(np.prod(SHAPE), dtype="<u2").reshape(SHAPE)
ROW = SHAPE[1] * 2
ARRAY_FILES = ("data", "data.npy", "data.tif", "chunks/c/0/0", "chunks/c/1/1")
GROUP_FILES = ("data.nc", "data.h5")  # (the root group's: they show every array)
DEADLINE = 8.0  # for recheck=2: what a connection reading on must see by then (2 s, generously)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    group = zarr.open_group(tmp_path / "g.zarr", mode="w", zarr_format=3)
    for name in ("a", "b", "c"):
        group.create_array(name, shape=SHAPE, chunks=(32, 16), dtype="<u2",
                           compressors=None)[...] = VALUES  # (data.tif's tiles: the chunks as stored)
    return tmp_path / "g.zarr"


@pytest.fixture
def server(tree: Path, tmp_path: Path) -> Iterator[Server]:
    with served(tree, tmp_path, ["rw"]) as running:
        yield running


def etags(server: Server, name: str) -> dict[str, str]:
    """The ETag of each of an array's files (GETs: each file's bytes read through the server)."""
    found = {}
    for file in (*ARRAY_FILES, "zarr.json"):
        headers = headers_of(server.url + f"{name}/{file}")
        assert headers[":status"] == "200", (name, file, headers)
        found[file] = headers["etag"]
    return found


def put_row(server: Server, name: str, row: int, value: int, scratch: Path) -> None:
    (scratch / "row").write_bytes(np.full(SHAPE[1], value, "<u2").tobytes())
    start = row * ROW
    assert status_of("-X", "PUT", "--data-binary", f"@{scratch / 'row'}", "-H",
                     f"Content-Range: bytes {start}-{start + ROW - 1}/*", server.url + f"{name}/data") == 204


def changed(before: dict[str, str], after: dict[str, str]) -> set[str]:
    return {file for file in before if before[file] != after[file]}


def test_a_write_gives_new_etags_to_its_arrays_files_only(server: Server, tmp_path: Path) -> None:
    a, b = etags(server, "a"), etags(server, "b")
    group = {name: headers_of(server.url + name)["etag"] for name in GROUP_FILES}
    assert etags(server, "a") == a  # (reading changes nothing)
    put_row(server, "a", 1, 7, tmp_path)
    a2, b2 = etags(server, "a"), etags(server, "b")
    assert changed(a, a2) == set(ARRAY_FILES)  # (its metadata's bytes are the same: its ETag too)
    assert b2 == b
    assert all(headers_of(server.url + name)["etag"] != group[name] for name in GROUP_FILES)  # (they show a)
    url = server.url + "a/data"
    assert status_of("-H", f"If-None-Match: {a['data']}", url) == 200
    assert status_of("-H", f"If-None-Match: {a2['data']}", url) == 304
    assert status_of("-H", f"If-None-Match: {b['data']}", server.url + "b/data") == 304
    stale = curl("-r", "0-9", "-H", f"If-Range: {a['data']}", "-w", "%{http_code}", url).stdout
    assert stale.endswith(b"200") and len(stale) == VALUES.nbytes + 3  # (another version: all of it)
    # A whole PUT of another length: the first dimension, so the metadata too.
    (tmp_path / "more").write_bytes(np.zeros((SHAPE[0] + 8, SHAPE[1]), "<u2").tobytes())
    assert status_of("-T", str(tmp_path / "more"), url) == 204
    a3 = etags(server, "a")
    assert changed(a2, a3) == {*ARRAY_FILES, "zarr.json"}
    assert etags(server, "b") == b


def test_another_writers_change_gives_new_etags_to_its_arrays_files_only(server: Server, tree: Path) -> None:
    a, b = etags(server, "a"), etags(server, "b")
    zarr.open_array(tree / "b", mode="r+")[40, 30] = 12345  # (chunk (1, 1))
    b2 = etags(server, "b")
    assert changed(b, b2) == set(ARRAY_FILES)
    assert etags(server, "a") == a
    assert np.frombuffer(curl(server.url + "b/data").stdout, "<u2").reshape(SHAPE)[40, 30] == 12345
    assert status_of("-H", f"If-None-Match: {b['data.tif']}", server.url + "b/data.tif") == 200
    assert status_of("-H", f"If-None-Match: {b2['data.tif']}", server.url + "b/data.tif") == 304


def test_a_tile_read_only_through_data_tif_follows_another_writer(server: Server, tree: Path) -> None:
    """data.tif's tiles are chunks as stored, read as they are: another writer's change to
    one is seen, with a new ETag, though nothing else of the array was read."""
    url = server.url + "c/data.tif"
    first = curl(url)
    before = headers_of(url)["etag"]
    zarr.open_array(tree / "c", mode="r+")[0:32, 0:16] = 9
    again = curl(url)
    assert again.stdout != first.stdout
    after = headers_of(url)
    assert after["etag"] != before
    assert status_of("-H", f"If-None-Match: {before}", url) == 200


def test_a_change_between_two_gets_is_seen_by_the_second(server: Server, tree: Path) -> None:
    url = server.url + "b/data"
    writer = zarr.open_array(tree / "b", mode="r+")
    with keep_alive(server) as connection:
        assert element(connection, "/b/data", whole=True) == VALUES[0, 0]
        writer[0, 0] = 1001
        assert element(connection, "/b/data", whole=True) == 1001  # (a whole GET: an open)
        assert element(connection, "/b/data") == 1001
        writer[0, 0] = 1002
        time.sleep(CONTINUED_WITHIN + 0.5)
        assert element(connection, "/b/data") == 1002  # (a range GET after a pause: an open)
    writer[0, 0] = 1003
    assert np.frombuffer(curl("-r", "0-1", url).stdout, "<u2")[0] == 1003  # (a new connection)


def test_a_range_get_continuing_its_connections_reading_costs_no_store_request(tree: Path,
                                                                                tmp_path: Path) -> None:
    log = tmp_path / "requests.log"
    with served(tree, tmp_path, ["ro"], env={"ZARRFS_REQUEST_LOG": str(log)}) as server, \
            keep_alive(server) as connection:
        assert element(connection, "/b/data", at=0) == VALUES[0, 0]  # (an open: the chunk read)
        before = len(log.read_text().splitlines())
        assert element(connection, "/b/data", at=1) == VALUES[0, 1]  # (continues it)
        assert len(log.read_text().splitlines()) == before, log.read_text()
        time.sleep(CONTINUED_WITHIN + 0.5)
        assert element(connection, "/b/data", at=2) == VALUES[0, 2]  # (after a pause: an open)
        assert len(log.read_text().splitlines()) > before


@pytest.mark.parametrize("recheck", ["2", "never"])
def test_recheck_seconds_and_never_as_a_mount(recheck: str, tree: Path, tmp_path: Path) -> None:
    """`recheck=2`: a connection reading on without a pause sees the change within 2 s;
    `never`: nothing sees it, a new connection neither."""
    writer = zarr.open_array(tree / "b", mode="r+")
    with served(tree, tmp_path, ["ro", f"recheck={recheck}"]) as server, keep_alive(server) as connection:
        assert element(connection, "/b/data") == VALUES[0, 0]
        writer[0, 0] = 2001
        deadline = time.monotonic() + DEADLINE
        seen = VALUES[0, 0]
        while seen != 2001 and time.monotonic() < deadline:
            time.sleep(0.1)
            seen = element(connection, "/b/data")
        if recheck == "never":
            assert seen == VALUES[0, 0]
            assert np.frombuffer(curl("-r", "0-1", server.url + "b/data").stdout, "<u2")[0] == VALUES[0, 0]
        else:
            assert seen == 2001


# -- a client keeping its connection ----------------------------------------------------------


@contextlib.contextmanager
def keep_alive(server: Server) -> Iterator[http.client.HTTPConnection]:
    """A connection to the server kept for the block (http.client keeps it alive)."""
    address = urlsplit(server.url)
    connection = http.client.HTTPConnection(address.hostname or "", address.port, timeout=60)
    try:
        yield connection
    finally:
        connection.close()


def element(connection: http.client.HTTPConnection, path: str, *, at: int = 0, whole: bool = False) -> int:
    """Element `at` of a uint16 file, by a range GET (or the whole file) on `connection`."""
    connection.request("GET", path, headers={} if whole else {"Range": f"bytes={2 * at}-{2 * at + 1}"})
    answer = connection.getresponse()
    body = answer.read()
    assert answer.status == (200 if whole else 206), (answer.status, body[:200])
    assert answer.getheader("Connection", "").lower() != "close"
    return int(np.frombuffer(body, "<u2")[at if whole else 0])
