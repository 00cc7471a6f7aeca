"""Where the daemon reports: its log (a file, stderr in the foreground, else syslog), and
systemd's notification socket (ready, stopping, where its metrics are)."""

from __future__ import annotations

import contextlib
import logging
import logging.handlers
import os
import socket
import sys

from ..fuse import quiet_late_release_replies
from ..options import MountOptions
from ..store import CLIENT_LOGGERS

log = logging.getLogger("zarrfs")


def setup_logging(options: MountOptions, *, foreground: bool) -> None:
    handler: logging.Handler
    if options.log_file:
        handler = logging.FileHandler(options.log_file)
        handler.setFormatter(logging.Formatter("%(asctime)s zarrfs[%(process)d] %(levelname)s %(message)s"))
    elif foreground:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("zarrfs: %(levelname)s %(message)s"))
    elif os.path.exists("/dev/log"):
        handler = logging.handlers.SysLogHandler("/dev/log")
        handler.setFormatter(logging.Formatter("zarrfs[%(process)d]: %(levelname)s %(message)s"))
    else:
        handler = logging.NullHandler()
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if options.debug else logging.INFO)
    quiet_late_release_replies()
    # Even with debug: the stores' clients log request headers and URLs, credentials included.
    for library in CLIENT_LOGGERS:
        logging.getLogger(library).setLevel(logging.WARNING)


def detach_stdio() -> None:
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    os.chdir("/")


def notify_systemd(problem: str | None) -> None:
    if problem is not None:
        print(f"zarrfs: {problem}", file=sys.stderr)
        return
    sd_notify(b"READY=1")


def announce_metrics(address: str) -> None:
    """Where the metrics are (port 0 picked one): in the log, and to whoever waits on
    NOTIFY_SOCKET (systemd shows STATUS; `zarrfs.mount` reads X_ZARRFS_METRICS) before READY."""
    log.info("serving metrics on http://%s/metrics", address)
    sd_notify(f"STATUS=metrics on http://{address}/metrics\nX_ZARRFS_METRICS={address}".encode())


def notify_systemd_stopping() -> None:
    sd_notify(b"STOPPING=1")


def sd_notify(message: bytes) -> None:
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return
    if address.startswith("@"):
        address = "\0" + address[1:]
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock, contextlib.suppress(OSError):
        sock.sendto(message, address)
