"""CORS for the origins named with --allow-origin, by curl: a named origin's answers (200,
206, 304, 404, 416) carry Access-Control-Allow-Origin, Vary and the headers a range reader
needs; an origin not named, and every origin by default, gets no CORS header; preflights are
answered before credentials (Private Network Access included); writes are allowed in a
preflight only when the server asks for credentials. (A real browser: test_browser.py.)"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
import zarr

from tests.helpers.mounting import ZARRFS
from tests.helpers.serving import curl, headers_of, served
from zarrfs.errors import ZarrfsError
from zarrfs.serve.origins import origin_of

PAGE = "http://127.0.0.1:8765"
OTHER = "http://127.0.0.1:8766"
TOKEN = "a-token-of-thirty-two-characters"
EXPOSED = {"content-range", "content-length", "accept-ranges", "etag"}


@pytest.fixture
def group(tmp_path: Path) -> Path:
    root = zarr.open_group(tmp_path / "g.zarr", mode="w", zarr_format=3)
    root.create_array("a", shape=(8,), chunks=(4,), dtype="u1")[...] = np.arange(8, dtype="u1")
    (tmp_path / "token").write_text(TOKEN + "\n")
    return tmp_path / "g.zarr"


def cors(headers: dict[str, str]) -> dict[str, str]:
    return {name: value for name, value in headers.items() if name.startswith("access-control-")}


def preflight(url: str, origin: str, method: str, *headers: str) -> dict[str, str]:
    asked = ["-H", f"Access-Control-Request-Headers: {', '.join(headers)}"] if headers else []
    return headers_of("-X", "OPTIONS", "-H", f"Origin: {origin}",
                      "-H", f"Access-Control-Request-Method: {method}", *asked, url)


@pytest.mark.fast
def test_a_named_origin_reads(group: Path, tmp_path: Path) -> None:
    args = ["--allow-origin", PAGE, "--allow-origin", "https://viewer.example"]
    with served(group, tmp_path, args=args) as server:
        data, page = server.url + "a/data", ("-H", f"Origin: {PAGE}")
        etag = headers_of(data)["etag"]
        cases: list[tuple[tuple[str, ...], str]] = [(("-r", "0-3"), "206"), ((), "200"), (("-I",), "200"),
                                                     (("-H", f"If-None-Match: {etag}"), "304"),
                                                     (("-r", "100-200"), "416")]
        for asked, status in cases:
            got = headers_of(*page, *asked, data)
            assert got[":status"] == status, (asked, got)
            assert got["access-control-allow-origin"] == PAGE and "Origin" in got["vary"], (asked, got)
            exposed = got["access-control-expose-headers"].lower().split(",")
            assert {name.strip() for name in exposed} == EXPOSED
        got = headers_of(*page, server.url + "a/missing")
        assert got[":status"] == "404" and got["access-control-allow-origin"] == PAGE
        assert curl(*page, "-r", "2-5", data).stdout == bytes(range(2, 6))
        other = headers_of("-H", "Origin: https://viewer.example", "-r", "0-3", data)
        assert other["access-control-allow-origin"] == "https://viewer.example"


@pytest.mark.fast
def test_an_origin_not_named_gets_no_cors(group: Path, tmp_path: Path) -> None:
    with served(group, tmp_path, args=["--allow-origin", PAGE]) as server:
        data = server.url + "a/data"
        for origin in (OTHER, "null", PAGE + "/", PAGE.replace("http", "https")):
            got = headers_of("-H", f"Origin: {origin}", "-r", "0-3", data)
            assert got[":status"] == "206" and not cors(got), (origin, got)
            assert "access-control-allow-origin" not in preflight(data, origin, "GET", "range")
        assert headers_of(data)["vary"] == "Origin"  # (a cache keeps no answer for the named one)
    with served(group, tmp_path) as server:  # (none named: nothing changes)
        got = headers_of("-H", f"Origin: {PAGE}", "-r", "0-3", server.url + "a/data")
        assert got[":status"] == "206" and not cors(got) and "vary" not in got, got
        assert not cors(preflight(server.url + "a/data", PAGE, "GET", "range"))


@pytest.mark.fast
def test_preflights_of_a_named_origin(group: Path, tmp_path: Path) -> None:
    with served(group, tmp_path, ["rw"], args=["--allow-origin", PAGE]) as server:
        data = server.url + "a/data"
        got = preflight(data, PAGE, "GET", "range", "if-none-match", "if-range")
        assert got[":status"] == "204" and got["access-control-allow-origin"] == PAGE, got
        assert {"GET", "HEAD", "OPTIONS"} <= set(got["access-control-allow-methods"].split(", "))
        assert "range" in got["access-control-allow-headers"].lower() and "Origin" in got["vary"]
        assert int(got["access-control-max-age"]) > 0 and "access-control-allow-private-network" not in got
        pna = headers_of("-X", "OPTIONS", "-H", f"Origin: {PAGE}", "-H", "Access-Control-Request-Method: GET",
                         "-H", "Access-Control-Request-Private-Network: true", data)
        assert pna["access-control-allow-private-network"] == "true" and pna[":status"] == "204", pna
        # (writes need credentials, which this server does not ask: a page may not write)
        for method, headers in (("PUT", ()), ("DELETE", ()), ("PROPFIND", ("depth",)), ("MKCOL", ()),
                                ("GET", ("authorization",)), ("GET", ("x-custom",))):
            refused = preflight(data, PAGE, method, *headers)
            assert refused[":status"] == "403" and not cors(refused), (method, refused)
        assert np.asarray(zarr.open_array(group / "a", mode="r")[...]).tolist() == list(range(8))


@pytest.mark.fast
def test_a_named_origin_writes_with_a_token(group: Path, tmp_path: Path) -> None:
    args = ["--allow-origin", PAGE, "--token-file", str(tmp_path / "token")]
    with served(group, tmp_path, ["rw"], args=args) as server:
        data, page = server.url + "a/data", ("-H", f"Origin: {PAGE}")
        got = preflight(data, PAGE, "PUT", "authorization", "content-type")
        assert got[":status"] == "204" and got["access-control-allow-origin"] == PAGE, got  # (no credentials)
        assert {"PUT", "DELETE", "MOVE", "MKCOL", "PROPFIND", "LOCK"} <= set(
            got["access-control-allow-methods"].split(", "))
        assert "authorization" in got["access-control-allow-headers"].lower()
        assert preflight(data, OTHER, "PUT", "authorization")[":status"] == "401"  # (as any OPTIONS)
        unauthorized = headers_of(*page, data)
        assert unauthorized[":status"] == "401" and unauthorized["access-control-allow-origin"] == PAGE
        written = bytes(range(8, 16)).decode()
        token = ("-H", f"Authorization: Bearer {TOKEN}")
        put = headers_of(*page, *token, "-X", "PUT", "--data-binary", written, data)
        assert put[":status"] in ("200", "204") and put["access-control-allow-origin"] == PAGE, put
        assert np.asarray(zarr.open_array(group / "a", mode="r")[...]).tolist() == list(range(8, 16))


@pytest.mark.fast
@pytest.mark.parametrize("origin", ["*", "http://127.0.0.1:8765/", "127.0.0.1:8765", "ftp://a.example",
                                    "http://a.example/path", "http://user@a.example", "http://a.example:99999"])
def test_what_is_not_an_origin_is_refused_at_start(group: Path, origin: str) -> None:
    done = subprocess.run([ZARRFS, "serve", str(group), "--listen", "127.0.0.1:0", "--allow-origin", origin],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "serving" not in done.stdout, done
    assert f"--allow-origin {origin}:" in done.stderr and "Traceback" not in done.stderr, done.stderr
    if origin == "*":
        assert "any page" in done.stderr


@pytest.mark.fast
def test_an_origin_is_taken_as_a_browser_spells_it() -> None:
    assert origin_of("HTTP://Viewer.Example:80") == "http://viewer.example"
    assert origin_of("https://viewer.example:443") == "https://viewer.example"
    assert origin_of("http://[::1]:8080") == "http://[::1]:8080"
    with pytest.raises(ZarrfsError, match="any page"):
        origin_of("*")
