"""A directory's page, for browsers (a GET of a directory): a plain HTML5 page listing its
members, each with its size (a file's) and its type, and a link to the parent. It is sent a
member at a time, a piece of at most `PIECE` bytes at once, as PROPFIND is (`propfind`): the
page of `chunks/` of a million chunks starts at once and is never held whole. Names are
escaped as HTML and links percent-encoded (relative to the directory, so a directory asked
without its final slash is sent there first, 301). A HEAD gets the page's headers only."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from html import escape
from typing import Any
from urllib.parse import quote

from wsgidav import util
from wsgidav.dav_error import DAVError

Member = Any  # (a WsgiDAV resource: a DAVCollection or a DAVNonCollection)
PIECE = 64 << 10  # bytes of the page sent at once
CONTENT_TYPE = "text/html; charset=utf-8"
HEAD = """<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>{title}</title>
<style>td {{ padding: 0 1em 0 0; }} td.size {{ text-align: right; }}</style></head>
<body>
<h1>{title}</h1>
<table>
<thead><tr><th>Name</th><th>Size</th><th>Type</th></tr></thead>
<tbody>
"""
TAIL = "</tbody>\n</table>\n</body>\n</html>\n"


def directory_page(listed: Iterable[Member], environ: dict[str, Any],
                   start_response: Callable[..., Any]) -> Iterable[bytes]:
    """The page of the directory at PATH_INFO whose members `listed` yields, as it yields them."""
    path = environ["PATH_INFO"]
    if not path.endswith("/"):
        return util.send_redirect_response(environ, start_response, location=path + "/")  # type: ignore[no-any-return]
    members = iter(listed)
    first = None if environ["REQUEST_METHOD"] == "HEAD" else next(members, None)  # (listed: or its status)
    start_response("200 OK", [("Content-Type", CONTENT_TYPE), ("Date", util.get_rfc1123_time())])
    if environ["REQUEST_METHOD"] == "HEAD":
        return [b""]
    return _pieces(_page(path, first, members))


def _page(path: str, first: Member | None, members: Iterator[Member]) -> Iterator[str]:
    yield HEAD.format(title=escape(path))
    if path != "/":
        yield '<tr><td><a href="../">../</a></td><td class="size"></td><td>directory</td></tr>\n'
    if first is not None:
        yield _row(first)
    for member in members:
        yield _row(member)
    yield TAIL


def _row(member: Member) -> str:
    name = member.get_display_name()
    if member.is_collection:
        href, size, kind = quote(name, safe="") + "/", "", "directory"
    else:
        href, size, kind = quote(name, safe=""), _size(member), member.get_content_type()
    return (f'<tr><td><a href="{escape(href)}">{escape(name)}{"/" if member.is_collection else ""}</a></td>'
            f'<td class="size">{size}</td><td>{escape(kind)}</td></tr>\n')


def _size(file: Member) -> str:
    try:
        return str(file.get_content_length())
    except DAVError:
        return ""  # (a file whose size cannot be had is still listed, as `ls` lists it)


def _pieces(texts: Iterable[str]) -> Iterator[bytes]:
    piece: list[bytes] = []
    held = 0
    for text in texts:
        piece.append(text.encode())
        held += len(piece[-1])
        if held >= PIECE:
            yield b"".join(piece)
            piece, held = [], 0
    yield b"".join(piece)
