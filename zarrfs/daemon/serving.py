"""Running a server (`zarrfs serve`): the life cycle a mount has (`lifecycle`: the store, the
tree, privileges dropped with `-o user=`, everything dirty written back at the end) around an
HTTP server bound to the address, serving until SIGTERM or SIGINT; the exit status 1 when the
final write-back gave up, as a mount's. No FUSE: nothing here imports
pyfuse3 (scripts/check_layers.py checks it), so it runs where nothing can mount.

It stays in the foreground (a service manager or `&` puts it in the background), and says
on standard output where it serves, once it does.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from types import FrameType

from ..errors import ZarrfsError
from ..options import TreeOptions
from ..serve import Access, Server, Site, address_of, application, http_server
from .lifecycle import Lifecycle

log = logging.getLogger("zarrfs")


def serve(source: str, host: str, port: int, access: Access, options: TreeOptions, *,
          client_timeout: int = 30) -> int:
    """Serve `source` on (host, port) until told to stop; the exit status."""
    logging.basicConfig(level=logging.DEBUG if options.debug else logging.INFO, stream=sys.stderr,
                        format="zarrfs serve: %(levelname)s %(message)s")
    for quiet in ("wsgidav", "cheroot"):
        logging.getLogger(quiet).setLevel(logging.WARNING)
    if access.in_clear:
        log.warning("--allow-plain-http: credentials travel in the clear to %s, for anyone on the way to "
                    "read and replay (--tls-cert and --tls-key serve HTTPS)", host)
    life = Lifecycle(source, options)
    with life:
        opened = life.open()
        site = Site(opened.tree, options, read_only=opened.store.read_only)
        with life.as_root():  # (a port below 1024 is root's)
            server = http_server(application(site, access), host, port, access, client_timeout=client_timeout)
        life.start_serving()
        life.serving()
        status = _run(server, address_of(server, access.certificate is not None), site)
    return status if life.stored else 1


def _run(server: Server, address: str, site: Site) -> int:
    stopping = threading.Event()

    def stop(signum: int, frame: FrameType | None) -> None:
        log.info("received %s: stopping", signal.Signals(signum).name)
        stopping.set()
        threading.Thread(target=server.stop, daemon=True).start()

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, stop)
    log.info("serving %s%s", address, " (read-only)" if site.read_only else "")
    print(f"serving {address}", flush=True)
    try:
        server.serve()
    except OSError as e:
        if not stopping.is_set():
            raise ZarrfsError(f"the server stopped: {e}") from None
    return 0
