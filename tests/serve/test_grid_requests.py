"""Requests about an array of 10^6 grid chunks of which 3 are stored, through `zarrfs serve`:
they cost what is stored, not the grid. DELETE of its `chunks/` is refused at once, DELETE and
MOVE of the array answered in what its three chunks cost (WsgiDAV's own DELETE listed every
descendant first, and gave no answer within 20 s); the browser's page of `chunks/` (a million
names) starts at once (WsgiDAV's was built whole: no first MiB within 20 s). The deadlines are
the issue's, generous on a loaded machine: the answers take milliseconds. And a lock below an
array keeps a DELETE of the array out, without the lock's token (423), found without a walk."""

from __future__ import annotations

import http.client
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import zarr

from tests.helpers.serving import Server, headers_of, served, status_of

GRID = (1000, 1000)  # chunks of one element: 10^6 grid chunks
WRITTEN = ((0, 0), (500, 7), (999, 999))
REFUSED_WITHIN = 5.0
ANSWERED_WITHIN = 20.0
LOCK = ('<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope>'
        '<D:locktype><D:write/></D:locktype></D:lockinfo>')


def sparse_grid(where: Path, shape: tuple[int, int] = GRID) -> Path:
    """A group holding the array `a` of one-element chunks (flat chunk keys, so that `chunks/`
    lists them all), three of them stored."""
    group = zarr.open_group(where, mode="w", zarr_format=3)
    array = group.create_array("a", shape=shape, chunks=(1, 1), dtype="uint8",
                               chunk_key_encoding={"name": "default", "separator": "."})
    for number, (row, column) in enumerate(WRITTEN, start=1):
        array[min(row, shape[0] - 1), min(column, shape[1] - 1)] = number
    group.create_group("elsewhere")
    return where


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return sparse_grid(tmp_path / "g.zarr")


@pytest.fixture
def server(tree: Path, tmp_path: Path) -> Iterator[Server]:
    with served(tree, tmp_path, ["rw"]) as running:
        yield running


def timed_status(*args: str, within: float) -> tuple[int, float]:
    """(the status of a curl request, its seconds); 0 when it got no answer in `within` s."""
    start = time.monotonic()
    status = status_of("-m", f"{within:g}", *args, timeout=within + 30)
    return status, time.monotonic() - start


def test_delete_and_move_cost_what_is_stored(server: Server, tree: Path) -> None:
    status, took = timed_status("-X", "DELETE", server.url + "a/chunks/", within=REFUSED_WITHIN)
    assert (status, took < REFUSED_WITHIN) == (403, True), took
    moved = f"Destination: {server.url}elsewhere/b/"
    status, took = timed_status("-X", "MOVE", "-H", moved, server.url + "a/", within=ANSWERED_WITHIN)
    assert status in (201, 204) and took < ANSWERED_WITHIN, (status, took)
    assert zarr.open_array(tree / "elsewhere" / "b", mode="r")[500, 7] == 2
    status, took = timed_status("-X", "DELETE", server.url + "elsewhere/b/", within=ANSWERED_WITHIN)
    assert status == 204 and took < ANSWERED_WITHIN, (status, took)
    assert not (tree / "elsewhere" / "b").exists() and not (tree / "a").exists()
    assert status_of(server.url + "elsewhere/b/zarr.json") == 404
    assert "Traceback" not in server.log()


def test_the_page_of_a_million_chunks_starts_at_once(server: Server) -> None:
    """The first MiB of the page of `chunks/` (a million rows) read from the socket in time,
    not the whole page."""
    address = urlsplit(server.url)
    connection = http.client.HTTPConnection(address.hostname, address.port, timeout=ANSWERED_WITHIN)
    start = time.monotonic()
    try:
        connection.request("GET", "/a/chunks/")
        answer = connection.getresponse()
        assert answer.status == 200 and answer.getheader("Content-Type") == "text/html; charset=utf-8"
        got = b""
        while len(got) < 1 << 20:
            piece = answer.read1(1 << 20)
            assert piece, f"the page ended after {len(got)} bytes"
            got += piece
    finally:
        connection.close()
    took = time.monotonic() - start
    assert took < ANSWERED_WITHIN, took
    assert got.startswith(b"<!DOCTYPE html>") and b'<a href="c.0.0">c.0.0</a>' in got
    assert got.count(b"<tr>") > 5000  # (rows of chunk files, each with its size: 1 byte)
    assert b'<td class="size">1</td>' in got


@pytest.mark.fast
def test_a_lock_below_an_array_keeps_its_delete_out(tmp_path: Path) -> None:
    small = sparse_grid(tmp_path / "small.zarr", (4, 4))
    with served(small, tmp_path, ["rw"]) as server:
        chunk = server.url + "a/chunks/c.0.0"
        locked = headers_of("-X", "LOCK", "-H", "Timeout: Second-60", "--data", LOCK, chunk)
        assert locked[":status"] == "200", locked
        assert status_of("-X", "DELETE", server.url + "a/") == 423
        assert zarr.open_array(small / "a", mode="r")[0, 0] == 1
        assert status_of("-X", "DELETE", server.url + "a/chunks/") == 403  # (refused: no lock asked)
        held = f"If: <{chunk}> ({locked['lock-token']})"  # (the lock's token, tagged with its URL)
        assert status_of("-X", "DELETE", "-H", held, server.url + "a/") == 204
        assert not (small / "a").exists()
        assert list(zarr.open_group(small, mode="r").group_keys()) == ["elsewhere"]
