"""Running a server (`zarrfs serve`): open the store and the tree as a mount does (`served`),
with its decoding processes and cache, bind the address, drop privileges (`-o user=`), serve
until SIGTERM or SIGINT, then write back everything dirty. No FUSE: nothing here imports
pyfuse3 (scripts/check_layers.py checks it), so it runs where nothing can mount.

It stays in the foreground (a service manager or `&` puts it in the background), and says
on standard output where it serves, once it does.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
import threading
from types import FrameType

from ..errors import ZarrfsError
from ..options import TreeOptions
from ..serve import Access, Server, Site, address_of, application, http_server
from ..store.observe import RequestLog
from . import preload, privileges
from .memory import Trimmer, bound_malloc
from .privileges import Identity
from .served import decoding, final_flush, open_tree, opened_store, remove_temporaries, shared_of

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
    identity = Identity.named(options.user, options.group)
    if identity is not None:
        preload.before_acting(source, options.source)  # (as root: see preload)
    with decoding(identity) as decoders:
        if identity is not None:
            identity.act()  # (the store, its disk cache and the tree opened as the user served)
            preload.as_user(identity)
        trim = bound_malloc()
        store = opened_store(source, options, RequestLog.from_environment())  # (ZARRFS_REQUEST_LOG)
        shared = shared_of(store, options, decoders, trim)
        try:
            tree = open_tree(store, shared, options.layout, rechecks=options.recheck is not None)
        except ZarrfsError:
            shared.close()
            raise
        site = Site(tree, options, read_only=store.read_only)
        trimmer = Trimmer(trim, shared.counters.activity) if trim else None
        try:
            with _as_root(identity):  # (a port below 1024 is root's)
                server = http_server(application(site, access), host, port, access,
                                     client_timeout=client_timeout)
            if identity is not None:
                identity.drop()  # (before the first request is read)
                shared.more_stats.append(privileges.stats)
            if not site.read_only:
                remove_temporaries(store)
            return _run(server, address_of(server, access.certificate is not None), site)
        finally:
            if trimmer is not None:
                trimmer.stop()
            flushed = final_flush(tree)
            tree.close()
            shared.close()
            store.close()
            if not flushed:
                log.error("not everything written was stored")


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


def _as_root(identity: Identity | None) -> contextlib.AbstractContextManager[None]:
    return contextlib.nullcontext() if identity is None else identity.root()
