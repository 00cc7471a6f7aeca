"""The driver of HTTP(S) servers: read-only, and with no listing to trust (a server's is a page
of links, or an error), so what many keys are is asked key by key (`many`)."""

from __future__ import annotations

from ..capabilities import Capabilities
from ..driver import Driver

PROTOCOLS = ("http", "https")


class HttpDriver(Driver):
    capabilities = Capabilities(lists=False, read_only=True)
