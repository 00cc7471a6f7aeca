"""The tree a mount shows, over WebDAV and HTTP, for machines that cannot mount: `zarrfs serve`.
Beside `fuse/`, on the tree's face, importing no pyfuse3 (WsgiDAV on cheroot: `zarrfs[serve]`)."""

from .access import DEFAULT_HOST, Access, AccessError, is_loopback, parse_listen
from .app import address_of, application, http_server
from .connections import Server
from .site import Site

__all__ = ["DEFAULT_HOST", "Access", "AccessError", "Server", "Site", "address_of", "application",
           "http_server", "is_loopback", "parse_listen"]
