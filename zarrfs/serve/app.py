"""The server: WsgiDAV over the tree (`resources`), behind the guard (`guard`), on cheroot's
threaded HTTP server (`connections`), with TLS when a certificate is given.

WebDAV class 2 (LOCK and UNLOCK, in memory for the server's life) when the tree is writable,
class 1 when it is not (Finder then mounts it read-only, as it should). No dead properties:
PROPPATCH is refused (the tree has nowhere to keep them). A directory's GET is a page listing
it, for browsers, streamed (`listing_page`, in place of WsgiDAV's page, which is built whole).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from wsgidav.error_printer import ErrorPrinter
from wsgidav.http_authenticator import HTTPAuthenticator
from wsgidav.request_resolver import RequestResolver
from wsgidav.wsgidav_app import WsgiDAVApp

from ..views.files import STREAM_BLOCK
from .access import Access
from .connections import Server
from .guard import Guard
from .handshakes import LateHandshakes
from .resources import TreeProvider
from .site import Site

log = logging.getLogger("zarrfs.serve")

THREADS = 16  # the server's threads when it is quiet (8 clients streaming fit)
MOST_THREADS = 128  # (`workers` adds threads up to this many while connections wait for one)
MAX_HEADERS = 64 << 10  # bytes of a request's line and headers


def application(site: Site, access: Access) -> Callable[..., Iterable[bytes]]:
    """The WSGI application serving `site`, behind its guard."""
    provider = TreeProvider(site)
    config: dict[str, Any] = {
        "provider_mapping": {"/": provider},
        # (credentials are the guard's: WsgiDAV lets in whom the guard did)
        "http_authenticator": {"domain_controller": None, "accept_basic": True, "accept_digest": False,
                               "default_to_digest": False},
        "simple_dc": {"user_mapping": {"*": True}},
        "middleware_stack": [ErrorPrinter, HTTPAuthenticator, RequestResolver],  # (no WsgiDAV pages)
        "lock_storage": None if site.read_only else True,
        "property_manager": None,
        "block_size": STREAM_BLOCK,
        "suppress_version_info": True,
        "verbose": 1,
        "logging": {"enable": False},
    }
    return Guard(WsgiDAVApp(config), access, provider.allowed)


def http_server(app: Callable[..., Iterable[bytes]], host: str, port: int, access: Access, *,
                client_timeout: int) -> Server:
    """The HTTP server of `app` on (host, port), bound (port 0: a free one); not yet serving.
    `client_timeout`: the seconds a client may leave its connection silent mid-request, in
    which it sends a request's headers, and in which it takes each block of an answer
    (`connections`)."""
    server = Server((host, port), app, numthreads=THREADS, max=MOST_THREADS, server_name="zarrfs",
                    timeout=client_timeout, request_queue_size=64)
    server.max_request_header_size = MAX_HEADERS
    if access.certificate is not None:
        server.ssl_adapter = LateHandshakes(access.certificate, access.key)
    server.prepare()
    return server


def address_of(server: Server, tls: bool) -> str:
    host, port = server.bind_addr[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"{'https' if tls else 'http'}://{shown}:{port}/"
