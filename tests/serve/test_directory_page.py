"""The page a browser gets for a directory of `zarrfs serve` (its GET): an HTML5 page naming
what PROPFIND names, with each file's size and type and a link to the parent; names with
spaces, `&`, `<`, `%` and letters outside ASCII escaped as HTML and their links
percent-encoded, so that following each link reaches its member. (That a big page starts at
once: test_grid_requests.py.)"""

from __future__ import annotations

import re
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin

import pytest
import zarr

from tests.helpers.serving import Server, curl, headers_of, served, status_of

pytestmark = pytest.mark.fast

NAMES = ["a b", "x&y", "<t>", "p%20q", "é ü", "c:d", 'q"uote']


class Rows(HTMLParser):
    """The page's table rows as (href, link text, the other cells' texts)."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[tuple[str, str, list[str]]] = []
        self.doctype = ""
        self._cells: list[str] | None = None
        self._href = ""

    def handle_decl(self, decl: str) -> None:
        self.doctype = decl

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "tr":
            self._cells, self._href = [], ""
        elif tag == "td" and self._cells is not None:
            self._cells.append("")
        elif tag == "a" and self._cells is not None:
            self._href = dict(attrs)["href"] or ""

    def handle_data(self, data: str) -> None:
        if self._cells:
            self._cells[-1] += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "tr" and self._cells:
            self.rows.append((self._href, self._cells[0], self._cells[1:]))
            self._cells = None


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    group = zarr.open_group(tmp_path / "g.zarr", mode="w", zarr_format=3)
    named = group.create_group("names")
    for name in NAMES:
        named.create_array(name, shape=(3,), dtype="<u2")[...] = [1, 2, 3]
    with served(tmp_path / "g.zarr", tmp_path, ["ro"]) as running:
        yield running


def page(url: str) -> Rows:
    done = curl("-D", "-", url)
    head, _, body = done.stdout.partition(b"\r\n\r\n")
    assert re.search(rb"(?im)^content-type: text/html; charset=utf-8\r?$", head), head
    rows = Rows()
    rows.feed(body.decode("utf-8"))
    rows.close()
    assert rows.doctype.lower() == "doctype html"
    return rows


def listed(server: Server, path: str) -> set[str]:
    """The names PROPFIND lists in the directory at (percent-encoded) `path`, directories
    with their final slash."""
    answer = curl("-X", "PROPFIND", "-H", "Depth: 1", server.url + path.lstrip("/")).stdout.decode()
    hrefs = re.findall(r"<[^>]*href>([^<]+)</", answer)
    assert unquote(hrefs[0]) == unquote(path)
    return {unquote(href).removeprefix(unquote(path)) for href in hrefs[1:]}


def test_the_page_names_what_the_directory_holds(server: Server) -> None:
    url = server.url + "names/"
    rows = page(url)
    assert rows.rows[0] == ("../", "../", ["", "directory"])
    names = {text for _, text, _ in rows.rows[1:]}
    assert names == listed(server, "/names/")
    assert {name + "/" for name in NAMES} <= names
    for href, text, (size, kind) in rows.rows[1:]:
        assert unquote(href) == text, (href, text)
        assert status_of(urljoin(url, href)) == 200, href
        if not text.endswith("/"):
            assert size == headers_of(urljoin(url, href))["content-length"] and kind, text
    assert any(href == "x%26y/" for href, _, _ in rows.rows)  # (percent-encoded, not `&`)


def test_a_page_for_each_array(server: Server) -> None:
    path = "/names/%C3%A9%20%C3%BC/"
    rows = page(server.url + path.lstrip("/"))
    files = {text: (size, kind) for _, text, (size, kind) in rows.rows[1:]}
    assert files["data"] == ("6", "application/octet-stream")
    assert files["data.npy"][1] == "application/x-npy" and files["zarr.json"][1] == "application/json"
    assert files["chunks/"] == ("", "directory")
    assert {text for _, text, _ in rows.rows[1:]} == listed(server, path)


def test_head_and_the_final_slash(server: Server) -> None:
    headed = headers_of("--head", server.url + "names/")
    assert headed[":status"] == "200" and headed["content-type"] == "text/html; charset=utf-8"
    assert curl("--head", server.url + "names/").stdout.endswith(b"\r\n\r\n")  # (no body)
    moved = headers_of(server.url + "names/a%20b")
    assert moved[":status"] == "301" and moved["location"] == "/names/a%20b/"
    root = page(server.url)
    assert [text for _, text, _ in root.rows if text.endswith("/")] == ["names/"]  # (no parent)
