"""Several ranges in one GET of `zarrfs serve` (RFC 9110, 14.2, 14.6, 15.3.7), with curl and
GDAL: a `multipart/byteranges` 206 whose parts hold exactly the bytes of zarr-python's values
at their offsets (main sent the first range only); ranges past the end dropped, none left 416;
overlapping ranges coalesced, too many sent as one covering them; a stale If-Range the whole
file; the validators and close-to-open of a single range's GET; HEAD the headers alone."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tifffile
import zarr

from tests.helpers.serving import Server, curl, group_of_one, headers_of, served

VALUES = (np.arange(96 * 160, dtype="<u2") * 7).reshape(96, 160)
SIZE = VALUES.nbytes  # 30720
Part = tuple[dict[str, str], bytes]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return group_of_one(tmp_path, "image", VALUES, (32, 64))


@pytest.fixture
def server(tree: Path, tmp_path: Path) -> Iterator[Server]:
    with served(tree, tmp_path, ["rw"]) as running:
        yield running


def stored(tree: Path) -> bytes:
    """The bytes of `data`: zarr-python's values, as the server shows them."""
    return np.asarray(zarr.open_array(tree / "image", mode="r")[...]).tobytes()


def get(*args: str) -> tuple[dict[str, str], bytes]:
    """The headers (names in lower case, the status as ":status") and the body of a request."""
    done = curl("-D", "-", *args)
    head, _, body = done.stdout.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {name.strip().lower(): value.strip() for name, _, value in
               (line.partition(":") for line in lines[1:])}
    return {":status": lines[0].split()[1], **headers}, body


def parts(headers: dict[str, str], body: bytes) -> list[Part]:
    """The parts of a multipart/byteranges body, by hand (RFC 2046, 5.1.1)."""
    found = re.fullmatch(r"multipart/byteranges; boundary=(\S+)", headers["content-type"])
    assert found is not None, headers
    assert int(headers["content-length"]) == len(body)
    delimiter = b"\r\n--" + found[1].encode()
    pieces = (b"\r\n" + body).split(delimiter)
    assert pieces[0] == b"" and pieces[-1] == b"--\r\n", pieces[-1][-40:]
    found_parts = []
    for piece in pieces[1:-1]:
        head, _, data = piece.removeprefix(b"\r\n").partition(b"\r\n\r\n")
        fields = dict(line.split(": ", 1) for line in head.decode().split("\r\n"))
        found_parts.append(({name.lower(): value for name, value in fields.items()}, data))
    return found_parts


def content_range(value: str) -> tuple[int, int]:
    """(first, last) of a Content-Range of a file of SIZE bytes."""
    found = re.fullmatch(r"bytes (\d+)-(\d+)/(\d+)", value)
    assert found is not None and int(found[3]) == SIZE, value
    return int(found[1]), int(found[2])


def spans_of(found: list[Part]) -> list[tuple[int, int]]:
    spans = []
    for fields, data in found:
        first, last = content_range(fields["content-range"])
        assert len(data) == last + 1 - first
        spans.append((first, last))
    return spans


@pytest.mark.fast
def test_two_ranges_get_both_parts(server: Server, tree: Path) -> None:
    url = server.url + "image/data"
    headers, body = get("-r", "0-3,1000-1003,-4", url)
    assert headers[":status"] == "206" and "content-range" not in headers
    found = parts(headers, body)
    data = stored(tree)
    assert spans_of(found) == [(0, 3), (1000, 1003), (SIZE - 4, SIZE - 1)]
    for (fields, got), (first, last) in zip(found, spans_of(found), strict=True):
        assert fields["content-type"] == "application/octet-stream"
        assert got == data[first:last + 1]
    single = headers_of("-r", "0-3", url)
    assert (headers["etag"], headers["last-modified"]) == (single["etag"], single["last-modified"])
    assert headers["accept-ranges"] == "bytes"
    zarr.open_array(tree / "image", mode="r+")[0, :2] = [11, 12]  # (another writer: seen at an open)
    headers, body = get("-r", "0-3,1000-1003", url)
    assert [got for _, got in parts(headers, body)] == [stored(tree)[:4], stored(tree)[1000:1004]]
    assert headers["etag"] != single["etag"]


@pytest.mark.fast
def test_ranges_past_the_end_are_dropped(server: Server, tree: Path) -> None:
    url = server.url + "image/data"
    headers, body = get("-r", f"0-3,{SIZE + 10}-{SIZE + 20}", url)  # (one left: a single part)
    assert (headers[":status"], headers["content-range"]) == ("206", f"bytes 0-3/{SIZE}")
    assert body == stored(tree)[:4]
    headers, _ = get("-r", f"{SIZE}-{SIZE + 5},{SIZE + 10}-", url)
    assert (headers[":status"], headers["content-range"]) == ("416", f"bytes */{SIZE}")
    headers, body = get("-H", "Range: bytes=5-2,0-3", url)  # (not a valid set of ranges: ignored)
    assert headers[":status"] == "200" and body == stored(tree)


@pytest.mark.fast
def test_validators_as_for_one_range(server: Server, tree: Path) -> None:
    url = server.url + "image/data"
    etag = headers_of(url)["etag"]
    headers, body = get("-r", "0-3,1000-1003", "-H", 'If-Range: "stale"', url)
    assert headers[":status"] == "200" and body == stored(tree)
    headers, body = get("-r", "0-3,1000-1003", "-H", f"If-Range: {etag}", url)
    assert headers[":status"] == "206" and len(parts(headers, body)) == 2
    assert get("-r", "0-3,1000-1003", "-H", f"If-None-Match: {etag}", url)[0][":status"] == "304"
    assert get("-r", "0-3,1000-1003", "-H", 'If-Match: "stale"', url)[0][":status"] == "412"


@pytest.mark.fast
def test_many_ranges_are_coalesced(server: Server, tree: Path) -> None:
    url = server.url + "image/data"
    data = stored(tree)
    headers, body = get("-r", "0-9,5-14,500-509,3-4", url)  # (overlapping: joined)
    found = parts(headers, body)
    assert spans_of(found) == [(0, 14), (500, 509)]
    assert [got for _, got in found] == [data[:15], data[500:510]]
    many = ",".join(f"{start}-{start + 3}" for start in range(0, 300 * 100, 300))  # 100 ranges
    headers, body = get("-r", many, url)
    assert headers[":status"] == "206"
    first, last = content_range(headers["content-range"])
    assert (first, last) == (0, 300 * 99 + 3) and body == data[first:last + 1]


@pytest.mark.fast
def test_head_says_what_a_get_sends(server: Server) -> None:
    url = server.url + "image/data"
    got, body = get("-r", "0-3,1000-1003", url)
    headed = curl("--head", "-r", "0-3,1000-1003", url).stdout
    assert headed.startswith(b"HTTP/1.1 206 ") and headed.endswith(b"\r\n\r\n")
    head = headers_of("--head", "-r", "0-3,1000-1003", url)
    assert head["content-type"].startswith("multipart/byteranges; boundary=")
    assert int(head["content-length"]) == int(got["content-length"]) == len(body)
    assert head["etag"] == got["etag"]


def test_gdal_asks_several_ranges_at_once(tmp_path: Path) -> None:
    """GDAL's /vsicurl/ with GDAL_HTTP_MULTIRANGE=SINGLE_GET asks the tiles of a window in one
    GET of several ranges (GDAL 3.6: `YES` asks them in parallel GETs of one range each)."""
    values = (np.arange(1024 * 1024, dtype=np.uint32) % 65521).astype("<u2").reshape(1024, 1024)
    zarr.open_array(tmp_path / "wide.zarr", mode="w", shape=values.shape, chunks=(256, 256),
                    dtype="<u2", zarr_format=3)[...] = values
    with served(tmp_path / "wide.zarr", tmp_path, ["ro"]) as server:
        env = {**os.environ, "GDAL_HTTP_MULTIRANGE": "SINGLE_GET", "CPL_CURL_VERBOSE": "YES",
               "GDAL_DISABLE_READDIR_ON_OPEN": "EMPTY_DIR"}
        done = subprocess.run(["gdal_translate", "-q", "-srcwin", "300", "0", "40", "1024",
                               f"/vsicurl/{server.url}data.tif", str(tmp_path / "out.tif")],
                              capture_output=True, text=True, timeout=120, env=env)
        assert done.returncode == 0, done.stderr[-2000:] + server.log()
    asked = re.findall(r"(?m)^Range: bytes=(\S+)", done.stderr)
    assert any(len(ranges.split(",")) >= 4 for ranges in asked), asked
    assert re.search(r"(?m)^< Content-Type: multipart/byteranges; boundary=", done.stderr)
    assert "ERROR" not in done.stderr  # (main's answer, one range of four: GDAL then asked each alone)
    assert np.array_equal(tifffile.imread(tmp_path / "out.tif"), values[:, 300:340])
