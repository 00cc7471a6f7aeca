"""CORS for the web pages the user names (`--allow-origin`, as rclone's), and for no other.

A page of a named origin may read the tree (GET, HEAD, OPTIONS, with `Range`, `If-None-Match`
and `If-Range`) and see the headers a range reader needs (`Content-Range`, `Content-Length`,
`Accept-Ranges`, `ETag`). It may write (PUT, DELETE, MOVE, MKCOL, PROPFIND, LOCK, ...) and send
`Authorization` only when the server asks for credentials: a page then writes with the token
or a password it was given, never as whoever can reach the server. Its preflights are
answered here (a browser sends them without credentials), Chrome's Private Network Access
included. Origins not named get no CORS header, as when none is named; a preflight of theirs
is no business of this module (it goes on as any OPTIONS does).

`*` is refused: any page on the web could then read a server on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ..errors import ZarrfsError

EXPOSED = "Content-Range, Content-Length, Accept-Ranges, ETag"
READS = ("GET", "HEAD", "OPTIONS")
WRITES = ("PUT", "DELETE", "MOVE", "COPY", "MKCOL", "PROPFIND", "PROPPATCH", "LOCK", "UNLOCK")
READ_HEADERS = ("Range", "If-None-Match", "If-Range")
WRITE_HEADERS = ("Authorization", "Content-Type", "Content-Range", "Depth", "Destination", "Overwrite",
                 "If", "If-Match", "Lock-Token", "Timeout")
MAX_AGE = 600  # seconds a browser may keep a preflight's answer
DEFAULT_PORTS = {"http": 80, "https": 443}
Headers = list[tuple[str, str]]


@dataclass(frozen=True)
class Origins:
    """The origins named, and what their pages may do (`writes`: the server asks for
    credentials)."""

    named: frozenset[str] = frozenset()
    writes: bool = False

    @classmethod
    def given(cls, origins: Iterable[str], *, credentials: bool) -> Origins:
        return cls(frozenset(origin_of(text) for text in origins), credentials)

    def of(self, environ: dict[str, Any]) -> str | None:
        """The request's Origin if it is named (None: no CORS for it)."""
        origin = environ.get("HTTP_ORIGIN")
        return origin if origin in self.named else None

    def answering(self, origin: str | None) -> Headers:
        """The headers of an answer to a request from `origin` (None: not named)."""
        if not self.named:
            return []
        if origin is None:
            return [("Vary", "Origin")]  # (a cache must not give this answer to a named origin)
        return [("Access-Control-Allow-Origin", origin), ("Vary", "Origin"),
                ("Access-Control-Expose-Headers", EXPOSED)]

    def preflight(self, environ: dict[str, Any], origin: str) -> tuple[str, Headers]:
        """The answer (status, headers) to a preflight of a named origin: allowing, or a
        403 allowing nothing (the method or a header it asks is not allowed)."""
        methods = READS + WRITES if self.writes else READS
        headers = READ_HEADERS + WRITE_HEADERS if self.writes else READ_HEADERS
        asked = environ.get("HTTP_ACCESS_CONTROL_REQUEST_METHOD", "")
        asked_headers = {name.strip().lower() for name in
                         environ.get("HTTP_ACCESS_CONTROL_REQUEST_HEADERS", "").split(",") if name.strip()}
        if asked not in methods or not asked_headers <= {name.lower() for name in headers}:
            return "403 Forbidden", [("Vary", "Origin")]
        answer = [("Access-Control-Allow-Origin", origin), ("Vary", "Origin"),
                  ("Access-Control-Allow-Methods", ", ".join(methods)),
                  ("Access-Control-Allow-Headers", ", ".join(headers)),
                  ("Access-Control-Max-Age", str(MAX_AGE))]
        if environ.get("HTTP_ACCESS_CONTROL_REQUEST_PRIVATE_NETWORK", "").lower() == "true":
            answer.append(("Access-Control-Allow-Private-Network", "true"))
        return "204 No Content", answer


def is_preflight(environ: dict[str, Any]) -> bool:
    return environ.get("REQUEST_METHOD") == "OPTIONS" and "HTTP_ACCESS_CONTROL_REQUEST_METHOD" in environ


def origin_of(text: str) -> str:
    """An `--allow-origin`, scheme://host[:port], as a browser's Origin header spells it
    (lower case, no default port); ZarrfsError if it is not one."""
    if text.strip() == "*":
        raise ZarrfsError("--allow-origin *: refused, since any page on the web could then read the "
                          "server (a server on 127.0.0.1 too); name each origin, as http://host:port")
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        parts, port = None, None
    if (parts is None or parts.scheme not in DEFAULT_PORTS or not parts.hostname or parts.username is not None
            or parts.password is not None or parts.path or parts.query or parts.fragment or "#" in text
            or text.endswith("?")):
        raise ZarrfsError(f"--allow-origin {text}: expected an origin, scheme://host[:port] (http or https, "
                          "no path, not even /), as a browser sends it in its Origin header")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    shown_port = "" if port is None or port == DEFAULT_PORTS[parts.scheme] else f":{port}"
    return f"{parts.scheme}://{host}{shown_port}"
