"""What every request passes before WsgiDAV sees it: a Host header naming this server
(`hosts`: 421 else, against DNS rebinding), a named origin's preflight answered (`origins`,
before credentials: a browser sends none with it), its credentials (`access`), a path that
names nothing outside the tree (no `.` or `..` segment, percent-encoded or not, no NUL or
backslash, also in a Destination), a body of bounded size (but a PUT's, which is the file's),
and a partial PUT's Content-Range, taken for the resources (`resources.CONTENT_RANGE`) where
WsgiDAV refuses it. On the way back, a 405 gets its Allow header (WsgiDAV's have none), and
every answer to a named origin its CORS headers."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import unquote, urlsplit

from .access import REALM, Access
from .origins import is_preflight
from .resources import CONTENT_RANGE

log = logging.getLogger("zarrfs.serve")

MAX_BODY = 1 << 20  # bytes of a request body but a PUT's (PROPFIND, LOCK, PROPPATCH: XML)
RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")
Refusal = tuple[str, str, list[tuple[str, str]]]


class Guard:
    """A WSGI application that lets only what belongs through to `app`, gives every 405 it
    answers the Allow header RFC 9110 asks for (`allowed`: the methods a path takes), and
    every answer to a named origin its CORS headers."""

    def __init__(self, app: Callable[..., Iterable[bytes]], access: Access,
                 allowed: Callable[[str], list[str]]) -> None:
        self.app = app
        self.access = access
        self.allowed = allowed

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        host = environ.get("HTTP_HOST")
        if not self.access.hosts.admit(host, environ.get("SERVER_ADDR"), environ.get("SERVER_PROTOCOL", "")):
            text = f"this server does not answer to the name {host!r}" if host else "a request needs a Host"
            return _refuse(environ, start_response, ("421 Misdirected Request" if host else "400 Bad Request",
                                                     text, []))
        origin = self.access.origins.of(environ)
        start = self._answering(environ, origin, start_response)
        if origin is not None and is_preflight(environ):
            status, headers = self.access.origins.preflight(environ, origin)
            if status.startswith("403"):
                return _refuse(environ, start_response, (status, "this origin may not do that", headers))
            start_response(status, headers)
            return []
        refusal = self.refusal(environ)
        if refusal is None:
            return self.app(environ, start)
        return _refuse(environ, start, refusal)

    def _answering(self, environ: dict[str, Any], origin: str | None,
                   start_response: Callable[..., Any]) -> Callable[..., Any]:
        cors = self.access.origins.answering(origin)

        def start(status: str, headers: list[tuple[str, str]], *exc_info: Any) -> Any:
            if status.startswith("405") and not any(name.lower() == "allow" for name, _ in headers):
                headers = [*headers, ("Allow", ", ".join(self.allowed(environ.get("PATH_INFO") or "/")))]
            return start_response(status, [*headers, *cors] if cors else headers, *exc_info)

        return start

    def refusal(self, environ: dict[str, Any]) -> Refusal | None:
        if not self.access.admits(environ.get("HTTP_AUTHORIZATION", "")):
            challenge = [("WWW-Authenticate", f'Basic realm="{REALM}", charset="UTF-8"')]
            if self.access.token is not None:
                challenge.append(("WWW-Authenticate", f'Bearer realm="{REALM}"'))
            return "401 Unauthorized", "credentials are needed", challenge
        paths = [environ.get("PATH_INFO", "")]
        if "HTTP_DESTINATION" in environ:
            paths.append(unquote(urlsplit(environ["HTTP_DESTINATION"]).path, encoding="latin-1"))
        if any(not inside(path) for path in paths):
            return "403 Forbidden", "the path names something outside the tree", []
        method = environ.get("REQUEST_METHOD", "")
        length = environ.get("CONTENT_LENGTH") or "0"
        if not length.isdigit():
            return "400 Bad Request", "Content-Length is not a number", []
        if method != "PUT" and int(length) > MAX_BODY:
            return "413 Content Too Large", f"a {method} body is at most {MAX_BODY} bytes", []
        if method == "PUT" and "HTTP_CONTENT_RANGE" in environ:
            return _take_range(environ, int(length))
        return None


def _refuse(environ: dict[str, Any], start_response: Callable[..., Any], refusal: Refusal) -> Iterable[bytes]:
    status, text, headers = refusal
    log.info("%s %s refused: %s (%s)", environ.get("REQUEST_METHOD"), environ.get("PATH_INFO"), status, text)
    body = (text + "\n").encode()
    start_response(status, [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body))),
                            *headers])
    return [body]


def inside(path: str) -> bool:
    """Whether a (decoded) URL path names a place below the root, by names alone."""
    if "\0" in path or "\\" in path:
        return False
    return not any(segment in (".", "..") for segment in path.split("/"))


def _take_range(environ: dict[str, Any], length: int) -> Refusal | None:
    """A partial PUT (as Apache's and SabreDAV's): its bytes' place, taken from the header."""
    found = RANGE.fullmatch(environ.pop("HTTP_CONTENT_RANGE").strip())
    if found is None:
        return "400 Bad Request", "Content-Range: expected bytes FIRST-LAST/LENGTH", []
    start, end = int(found[1]), int(found[2])
    if end < start or end - start + 1 != length:
        return "400 Bad Request", "Content-Range does not span the body's Content-Length", []
    environ[CONTENT_RANGE] = (start, end)
    return None
