"""`zarrfs serve` as HTTP clients expect it, asked with the real curl: ranges (206, 416,
Accept-Ranges), ETags and If-None-Match / If-Range, content types per view, PROPFIND's depth,
and the values equal to zarr-python's."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import zarr

from tests.helpers.serving import Server, curl, headers_of, served, status_of

pytestmark = pytest.mark.fast

VALUES = np.arange(200 * 300, dtype="<u2").reshape(200, 300)


def make_group(path: Path) -> None:
    group = zarr.open_group(path, mode="w", zarr_format=3)
    group.create_array("image", shape=VALUES.shape, chunks=(64, 64), dtype="<u2")[...] = VALUES
    group.create_group("empty")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    path = tmp_path_factory.mktemp("http")
    make_group(path / "g.zarr")
    with served(path / "g.zarr", path, ["ro"]) as running:
        yield running


def test_data_whole_and_in_ranges(server: Server) -> None:
    url = server.url + "image/data"
    assert curl(url).stdout == VALUES.tobytes()
    headers = headers_of("-r", "1000-1999", url)
    assert headers[":status"] == "206"
    assert headers["content-range"] == f"bytes 1000-1999/{VALUES.nbytes}"
    assert headers["accept-ranges"] == "bytes"
    assert curl("-r", "1000-1999", url).stdout == VALUES.tobytes()[1000:2000]
    assert curl("-r", "-100", url).stdout == VALUES.tobytes()[-100:]  # (a suffix range)
    assert status_of("-r", f"{VALUES.nbytes}-", url) == 416
    head = headers_of("-I", url)
    assert head[":status"] == "200" and head["content-length"] == str(VALUES.nbytes)


def test_etags_answer_if_none_match_and_if_range(server: Server) -> None:
    url = server.url + "image/data"
    etag = headers_of(url)["etag"]
    assert re.fullmatch(r'"[^"]+"', etag), etag
    assert status_of("-H", f"If-None-Match: {etag}", url) == 304
    assert status_of("-H", 'If-None-Match: "other"', url) == 200
    assert status_of("-r", "0-9", "-H", f"If-Range: {etag}", url) == 206
    changed = curl("-r", "0-9", "-H", 'If-Range: "older"', "-w", "%{http_code}", url).stdout
    assert changed == VALUES.tobytes() + b"200"  # (not the same version: the whole file)


@pytest.mark.parametrize(("name", "kind"), [
    ("image/data.tif", "image/tiff"), ("image/data.h5", "application/x-hdf5"),
    ("image/data.npy", "application/x-npy"), ("image/zarr.json", "application/json"),
    ("image/data", "application/octet-stream"), ("image/data.raw.nhdr", "text/plain; charset=utf-8"),
])
def test_content_types_per_view(server: Server, name: str, kind: str) -> None:
    assert headers_of("-I", server.url + name)["content-type"] == kind


def test_views_and_metadata_are_the_trees(server: Server) -> None:
    npy = curl(server.url + "image/data.npy").stdout
    header_length = len(npy) - VALUES.nbytes
    assert npy[header_length:] == VALUES.tobytes()
    assert json.loads(curl(server.url + "image/zarr.json").stdout)["shape"] == list(VALUES.shape)
    assert curl(server.url + "image/chunks/0/1").stdout  # (a chunk file, as stored)


def test_depth_infinity_is_refused_and_depth_one_lists(server: Server) -> None:
    for depth in (["-H", "Depth: infinity"], []):
        assert status_of("-X", "PROPFIND", *depth, server.url) == 403
    listing = curl("-X", "PROPFIND", "-H", "Depth: 1", server.url + "image/").stdout.decode()
    hrefs = re.findall(r"<[^>]*href>([^<]+)</", listing)
    assert hrefs[0] == "/image/"
    assert {"/image/data", "/image/data.tif", "/image/chunks/", "/image/zarr.json"} <= set(hrefs)
    assert status_of("-X", "PROPFIND", "-H", "Depth: 0", server.url + "image/missing") == 404


def test_a_read_only_server_refuses_writes(server: Server) -> None:
    """A tree served read-only takes none of the methods that write (405), and each 405 says
    which it takes (Allow, RFC 9110): those answer."""
    url = server.url + "image/data"
    refused = [["-X", "PUT", "--data-binary", "xx", "-H", "Content-Range: bytes 0-1/*", url],
               ["-X", "MKCOL", server.url + "new/"], ["-X", "DELETE", server.url + "image/"],
               ["-X", "LOCK", url]]  # (class 1 only: nothing to lock)
    for request in refused:
        headers = headers_of(*request)
        assert headers[":status"] == "405", (request, headers)
        assert {m.strip() for m in headers["allow"].split(",")} == {"OPTIONS", "GET", "HEAD", "PROPFIND"}
    assert headers_of("-X", "OPTIONS", server.url)["dav"] == "1"
    for method, status in (("OPTIONS", 200), ("GET", 200), ("HEAD", 200), ("PROPFIND", 207)):
        # (HEAD as curl's --head: with `-X HEAD` curl waits for the body the Content-Length
        # announces, until the server drops the idle connection, 30 s)
        how = ["--head"] if method == "HEAD" else ["-X", method]
        assert status_of(*how, "-H", "Depth: 0", url) == status, method


def test_a_directory_is_a_page_for_browsers(server: Server) -> None:
    page = curl("-L", server.url + "image").stdout.decode()
    assert "data.tif" in page and "<html" in page.lower()
