"""Several ranges in one GET or HEAD (RFC 9110, 14.2, 14.6, 15.3.7; one range is WsgiDAV's).

`Range: bytes=0-3,1000-1003` is answered `206` with a `multipart/byteranges` body, each part
with its Content-Type and Content-Range, its bytes read as a range GET reads them
(`streams.FileReader`: a part of more than `STREAMED_BYTES` through the read-ahead) and
streamed, the Content-Length said before the first byte. Ranges that overlap, or lie closer
than a part's own headers, are coalesced (in the file's order); when more than `MOST_PARTS`
parts are left, one range covering them all is sent instead (a single-part 206): what a
request costs stays bounded, as RFC 9110 allows. Ranges that start past the end are dropped;
none left is `416`. A Range that is not a valid set of byte ranges is ignored, and so are
ranges whose If-Range does not hold: the whole file, 200 (WsgiDAV's own answer).

The preconditions (If-Match, If-None-Match, If-Modified-Since, If-Unmodified-Since, WebDAV's
If), the validators sent and close-to-open are those of a single range's GET: the file was
looked up as a GET's is (`resources.TreeProvider.get_resource_inst`, an open)."""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

from wsgidav import util
from wsgidav.dav_error import HTTP_PRECONDITION_FAILED, HTTP_RANGE_NOT_SATISFIABLE, DAVError

from ..views import FileView
from ..views.files import STREAM_BLOCK
from .statuses import HTTP_SERVICE_UNAVAILABLE, answering
from .streams import STREAMED_BYTES, FileReader

MOST_PARTS = 64  # parts of one answer; past it, one range covering them all
GAP = 100  # bytes between two ranges below which they are sent as one (a part's headers: about so many)
SPEC = re.compile(r"\s*(\d*)\s*-\s*(\d*)\s*")
Span = tuple[int, int]  # (first, last): a range's bytes, both included


class RangedFile(Protocol):
    """What is read of a file here (`resources.File`, WsgiDAV's resource of a file)."""

    path: str
    provider: Any

    @property
    def view(self) -> FileView: ...
    def validators(self) -> tuple[str, float]: ...
    def get_content_length(self) -> int: ...
    def get_content_type(self) -> str: ...
    def get_ref_url(self) -> str: ...


def several_ranges(file: RangedFile, environ: dict[str, Any], start_response: Callable[..., Any],
                   whole: Callable[..., Iterable[bytes]]) -> Iterable[bytes]:
    """The answer to a GET or HEAD of `file` asking several ranges; `whole`: WsgiDAV's
    answer, for the whole file."""
    etag, modified = file.validators()
    _preconditions(file, environ, etag, modified)
    size = file.get_content_length()
    spans = None if size == 0 or not _if_range_holds(environ, etag, modified) else \
        satisfiable(environ["HTTP_RANGE"], size)
    if spans is None:
        del environ["HTTP_RANGE"]  # (ignored, RFC 9110, 13.1.5 and 14.2)
        return whole(environ, start_response)
    if not spans:
        raise DAVError(HTTP_RANGE_NOT_SATISFIABLE, context_info="no range lies in the file",
                       add_headers=[("Content-Range", f"bytes */{size}")])
    spans = coalesced(spans)
    headers = [("Last-Modified", util.get_rfc1123_time(modified)), ("Date", util.get_rfc1123_time()),
               ("ETag", f'"{etag}"'), ("Accept-Ranges", "bytes")]
    if len(spans) == 1:
        (first, last), = spans
        headers += [("Content-Type", file.get_content_type()), ("Content-Length", str(last + 1 - first)),
                    ("Content-Range", f"bytes {first}-{last}/{size}")]
        body: Iterator[bytes] = _bytes(file, first, last)
    else:
        boundary = secrets.token_hex(16)
        heads = [_part_head(boundary, index, file.get_content_type(), span, size)
                 for index, span in enumerate(spans)]
        tail = f"\r\n--{boundary}--\r\n".encode()
        length = sum(map(len, heads)) + sum(last + 1 - first for first, last in spans) + len(tail)
        headers += [("Content-Type", f"multipart/byteranges; boundary={boundary}"),
                    ("Content-Length", str(length))]
        body = _parts(file, zip(heads, spans, strict=True), tail)
    start_response("206 Partial Content", headers)
    return [b""] if environ["REQUEST_METHOD"] == "HEAD" else body


def satisfiable(header: str, size: int) -> list[Span] | None:
    """The ranges of a Range header that lie in a file of `size` bytes (> 0), in the order
    asked; None if the header is not a valid set of byte ranges (then it is ignored)."""
    unit, _, specs = header.partition("=")
    if unit.strip().lower() != "bytes":
        return None
    spans, asked = [], 0
    for spec in specs.split(","):
        found = SPEC.fullmatch(spec)
        if found is None or (found[1] == "" and found[2] == "" and spec.strip()):
            return None
        first, last = found[1], found[2]
        if first == "" and last == "":
            continue  # (an empty element of the list: RFC 9110, 5.6.1)
        asked += 1
        if first == "":  # (the last `last` bytes)
            if int(last) > 0:
                spans.append((max(0, size - int(last)), size - 1))
        elif last and int(last) < int(first):
            return None
        elif int(first) < size:
            spans.append((int(first), min(size - 1, int(last)) if last else size - 1))
    return spans if asked else None


def coalesced(spans: list[Span]) -> list[Span]:
    """The ranges to send: in the file's order, those that overlap or lie closer than `GAP`
    joined; one covering them all if more than `MOST_PARTS` are left."""
    joined: list[Span] = []
    for first, last in sorted(spans):
        if joined and first <= joined[-1][1] + 1 + GAP:
            joined[-1] = (joined[-1][0], max(joined[-1][1], last))
        else:
            joined.append((first, last))
    return joined if len(joined) <= MOST_PARTS else [(joined[0][0], max(last for _, last in joined))]


def _preconditions(file: RangedFile, environ: dict[str, Any], etag: str, modified: float) -> None:
    """412 or 304 as a single range's GET gives them (RFC 9110, 13.2.2: before the ranges)."""
    util.evaluate_http_conditionals(file, int(modified), etag, environ)
    util.parse_if_header_dict(environ)
    if "HTTP_IF" not in environ:
        return
    url = file.get_ref_url()
    locks = file.provider.lock_manager
    who = environ["wsgidav.user_name"]
    held = [] if locks is None else \
        [lock["token"] for lock in locks.get_indirect_url_lock_list(url, principal=who)]
    if not util.test_if_header_dict(file, environ["wsgidav.conditions.if"], url, held, etag):
        raise DAVError(HTTP_PRECONDITION_FAILED, context_info="'If' header condition failed")


def _if_range_holds(environ: dict[str, Any], etag: str, modified: float) -> bool:
    """Whether an If-Range (if any) names the file's version: its ETag, or its date."""
    if_range = environ.get("HTTP_IF_RANGE")
    if if_range is None:
        return True
    date: int | None = util.parse_time_string(if_range)
    return int(modified) == date if date else if_range.strip('" ') == etag


def _part_head(boundary: str, index: int, content_type: str, span: Span, size: int) -> bytes:
    first, last = span
    before = "\r\n" if index else ""  # (the line end ending the part before belongs to the delimiter)
    return (f"{before}--{boundary}\r\nContent-Type: {content_type}\r\n"
            f"Content-Range: bytes {first}-{last}/{size}\r\n\r\n").encode()


def _parts(file: RangedFile, parts: Iterable[tuple[bytes, Span]], tail: bytes) -> Iterator[bytes]:
    for head, (first, last) in parts:
        for index, block in enumerate(_bytes(file, first, last)):
            yield head + block if index == 0 else block
    yield tail


def _bytes(file: RangedFile, first: int, last: int) -> Iterator[bytes]:
    """The bytes first..last of the file, a block at a time."""
    what = f"GET {file.path}"
    reader = FileReader(file.view, streamed=last + 1 - first > STREAMED_BYTES)
    reader.seek(first)
    left = last + 1 - first
    try:
        while left:
            with answering(what):
                block = reader.read(min(left, STREAM_BLOCK))
            if not block:
                raise DAVError(HTTP_SERVICE_UNAVAILABLE, context_info=f"{file.path} shrank while sent")
            left -= len(block)
            yield block
    finally:
        with answering(what):
            reader.close()
