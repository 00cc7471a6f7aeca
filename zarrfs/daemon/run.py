"""Running a mount: check the mountpoint, open the array, mount, serve, flush, unmount.

Without `-f` the command forks a daemon and returns only when the mount is serving (or
prints why it could not mount). With `-f` it serves in the foreground and tells systemd
it is ready when NOTIFY_SOCKET is set.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import logging.handlers
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import pyfuse3
import trio

from ..array import Shared
from ..errors import MetadataError, MountError, ZarrfsError, missing_package
from ..formats import discover
from ..fuse import ZarrOperations, quiet_late_release_replies
from ..options import MountOptions
from ..store import Store, one_line
from ..store.disk_cache import CachedReads, open_disk_cache
from ..store.observe import Observers, RequestLog, StoreObserver
from ..tree import Tree, tree_of
from ..views.array_dir import Layout
from . import privileges, watchdog
from .kernel_window import window_kb
from .memory import Trimmer, bound_malloc
from .mountpoint import check_mountpoint, mount_device, readahead_setting, set_readahead
from .parent import Parent
from .privileges import Identity

if TYPE_CHECKING:
    from .metrics import Metrics

log = logging.getLogger("zarrfs")

FINAL_FLUSH_SECONDS = 60.0
REMOTE_THREADS = 32  # loader threads of a remote store: requests in flight (20 ms cold dd: 16 < 32 > 48)

Ready = Callable[[str | None], None]  # called once: None when serving, else the reason


def mount(source: str, mountpoint: str, options: MountOptions, *, foreground: bool) -> int:
    source = _absolute_source(source)
    mountpoint = os.path.abspath(mountpoint)
    check_mountpoint(mountpoint)
    if options.log_file:
        try:
            open(options.log_file, "a").close()
        except OSError as e:
            raise MountError(f"log file {options.log_file}: {e.strerror}") from None
    if foreground:
        _setup_logging(options, foreground=True)
        return _serve(source, mountpoint, options, _notify_systemd)
    return _daemonize(source, mountpoint, options)


def _daemonize(source: str, mountpoint: str, options: MountOptions) -> int:
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        os.setsid()
        _setup_logging(options, foreground=False)
        reported = False

        def ready(problem: str | None) -> None:
            nonlocal reported
            reported = True
            os.write(write_end, b"OK\n" if problem is None else problem.encode() + b"\n")
            os.close(write_end)
            if problem is None:
                _detach_stdio()

        status = 1
        try:
            status = _serve(source, mountpoint, options, ready)
        except BaseException as e:
            log.exception("the daemon failed")
            if not reported:
                ready(f"the daemon failed before mounting: {_failure(e)} (see the log)")
        finally:
            os._exit(status)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        message = pipe.read().decode(errors="replace").strip()
    if message == "OK":
        if not options.log_file and not os.path.exists("/dev/log"):
            print("zarrfs: note: no syslog on this machine (/dev/log); add -o log=FILE to keep "
                  "the daemon's log", file=sys.stderr)
        return 0
    print(f"zarrfs: {message or 'the daemon exited before mounting'}", file=sys.stderr)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)
    return 1


def _serve(source: str, mountpoint: str, options: MountOptions, ready: Ready) -> int:
    try:
        identity = Identity.named(options.user, options.group)
    except MountError as e:
        ready(str(e))
        return 1
    if options.metrics is None:
        return _serve_with(source, mountpoint, options, ready, None, identity)
    from .metrics import Metrics, MetricsError  # (prometheus_client: only when asked for)

    metrics = Metrics(source)
    try:
        # Before the store is opened: a port in use fails the mount at once, with its reason.
        metrics.serve(*options.metrics)
    except MetricsError as e:
        ready(str(e))
        return 1
    try:
        return _serve_with(source, mountpoint, options, ready, metrics, identity)
    finally:
        metrics.close()


def _serve_with(source: str, mountpoint: str, options: MountOptions, ready: Ready,
                metrics: Metrics | None, identity: Identity | None) -> int:
    if identity is not None:
        identity.act()  # (the store, its disk cache and the tree opened as the user served)
    trim = bound_malloc()
    try:
        store = Store.open(source, options.storage_options, read_only=options.read_only,
                           settings=options.source, observer=_observer(metrics),
                           writable=options.read_write)
        store.disk_cache = _disk_cache(store, source, options)
        store.prepare()
    except ZarrfsError as e:
        ready(_public(f"cannot mount {source}: {e}"))
        return 1
    # A remote store's reads wait on the network, not the CPU: keep more of them in flight.
    # ... but no more at once than cores while its disk cache serves them (`LoaderPool`).
    served_locally = None if store.disk_cache is None or options.threads else store.disk_cache.served_locally
    shared = Shared(options.cache_bytes, options.threads or (None if store.is_local else REMOTE_THREADS),
                    fill_missing_reads=options.fill_missing_data_reads,
                    store_fill_chunks=options.store_data_equal_to_fill_value, served_locally=served_locally)
    if store.disk_cache is not None:
        shared.more_stats.append(store.disk_cache.stats)
    if metrics is not None:
        metrics.watch(shared)
    try:
        layout = Layout(options.byteorder, options.fortran_order, options.views, options.nc_cdf5)
        tree = open_tree(store, shared, layout, rechecks=options.recheck is not None)
    except ZarrfsError as e:
        shared.close()
        ready(_public(f"cannot mount {source}: {e}"))  # a store error may quote the URL
        return 1
    operations = ZarrOperations(tree, options, read_only=store.read_only,
                                timeout=store.retry.deadline_seconds if store.bounded else None,
                                room=store.statvfs, timings=metrics, silence=store.answers.silence)
    try:
        # /proc/mounts separates options with commas: none in the source shown there.
        with contextlib.nullcontext() if identity is None else identity.root():
            pyfuse3.init(operations, mountpoint, options.fuse_options(_public(source).replace(",", "_")))
            readahead = readahead_setting(mountpoint)
            watchdog.fusectl_ready()
    except (RuntimeError, OSError) as e:
        ready(f"cannot mount on {mountpoint}: {e}")
        tree.close()
        shared.close()
        return 1
    if identity is not None:
        identity.drop()  # (before the first request is read)
    shared.more_stats.append(privileges.stats)

    parent = Parent.from_environment()  # (`zarrfs.mount`: the mount ends with its process)

    def on_serving() -> None:
        # What the daemon made to start (modules, codecs, store clients: some 10^5 objects)
        # lives as long as it does: a full collection walking it stalled a read for 40-60 ms
        # (a warm 128 MiB `dd` from the disk cache: 1 of 4 of its time). Left out of them.
        gc.freeze()
        set_readahead(readahead, window_kb(options, tree))
        log.info("mounted %s on %s%s", _public(source), mountpoint,
                 " (read-only)" if operations.read_only else "")
        if operations.read_only and not options.read_only:
            log.warning("%s cannot be written (a read-only source, or no permission to write "
                        "there): mounted read-only", _public(source))
        if metrics is not None:
            _announce_metrics(metrics.address)
        ready(None)
        if parent is not None:
            parent.watch()
        if not operations.read_only:
            _remove_temporaries(store)

    guard = _start_watchdog(mountpoint)
    shared.cache.give_back = trim
    trimmer = Trimmer(trim, shared.counters.activity) if trim else None
    status = 0
    try:
        trio.run(operations.serve, mountpoint, on_serving)
    finally:
        if trimmer is not None:
            trimmer.stop()
        _notify_systemd_stopping()
        if not final_flush(tree):
            status = 1
        with contextlib.suppress(Exception):
            pyfuse3.close(unmount=True)
        tree.close()
        shared.close()
        if store.disk_cache is not None:
            store.disk_cache.cache.close()
        log.info("unmounted %s", mountpoint)
        if guard is not None:
            guard.terminate()
            guard.wait()
        if parent is not None:
            parent.leave_nothing(mountpoint)
    return status


def _disk_cache(store: Store, source: str, options: MountOptions) -> CachedReads | None:
    """-o disk_cache: the cache of the store's reads (DiskCacheError: DIR cannot be one)."""
    if options.disk_cache is None:
        return None
    reads = open_disk_cache(store, source, options.storage_options, options.disk_cache,
                            options.disk_cache_size)
    if reads is None:
        log.warning("%s is not cached on disk (-o disk_cache serves S3, GCS, Azure and Icechunk)",
                    _public(source))
    return reads


def _observer(metrics: Metrics | None) -> StoreObserver | None:
    """What watches the store's operations: the metrics, and the request log when asked for
    (ZARRFS_REQUEST_LOG), both, or nothing."""
    watching = [o for o in (metrics, RequestLog.from_environment()) if o is not None]
    return None if not watching else watching[0] if len(watching) == 1 else Observers(*watching)


def _failure(e: BaseException) -> str:
    """What stopped the daemon, in a line; a missing package with the extra that installs it."""
    return missing_package(e) or one_line(e)


def _start_watchdog(mountpoint: str) -> subprocess.Popen[bytes] | None:
    device = mount_device(mountpoint)
    guard = watchdog.start(os.getpid(), device.split(":")[-1]) if device else None
    if guard is None:
        log.warning("no watchdog (fusectl is not mounted on %s): should the daemon be killed "
                    "while it drops cached pages, the mount may hang until aborted there",
                    watchdog.CONNECTIONS)
    return guard


def open_tree(store: Store, shared: Shared, layout: Layout, *, rechecks: bool = False) -> Tree:
    """The tree of what `store` holds. An array at the root must open, or the mount fails."""
    root = discover(store.get, "")
    if root is None:
        raise MetadataError("zarr.json", "not found (nor .zarray / .zgroup / meta): no Zarr array or group")
    tree = tree_of(store, root, shared, layout, rechecks=rechecks)  # (with .versions/: Icechunk)
    if not store.read_only and not store.conditional:
        log.warning("%s cannot write conditionally: writers other than this mount are not "
                    "coordinated (concurrent writes to one chunk may overwrite each other)", store.path(""))
    if root.kind == "array":
        opened = tree.open_array("")
        if opened.problem is not None and opened.strings is None:  # (strings: their own files)
            raise ZarrfsError(opened.problem)
    return tree


def final_flush(tree: Tree) -> bool:
    """Write back everything dirty, retrying while the store is failing."""
    deadline = time.monotonic() + FINAL_FLUSH_SECONDS
    delay = 0.5
    while True:
        try:
            for array in tree.opened_arrays():
                array.flush()
            return True
        except (OSError, ZarrfsError) as e:
            if time.monotonic() + delay > deadline:
                log.error("gave up writing %d dirty bytes back: %s", tree.shared.cache.dirty_bytes, e)
                return False
            log.warning("write-back failed (%s); retrying in %.1f s", e, delay)
            time.sleep(delay)
            delay = min(delay * 2, 10.0)
        except Exception:
            # A bug, not a store fault: say so, and still close the session, the tree and the
            # watchdog (the caller does, once this returns).
            log.exception("write-back failed; %d dirty bytes not written", tree.shared.cache.dirty_bytes)
            return False


def _remove_temporaries(store: Store) -> None:
    try:
        removed = store.remove_stale_temporaries()
    except OSError as e:
        log.warning("could not look for stale temporary files: %s", e)
        return
    if removed:
        log.info("removed %d temporary files left by an interrupted write", removed)


def _absolute_source(source: str) -> str:
    return source if "://" in source or "::" in source else os.path.abspath(source)


def _public(text: str) -> str:
    """A source (or a message naming one) as it may appear in logs: no credentials in URLs."""
    return re.sub(r"//[^/@\s]*@", "//", text)


# -- logging and systemd ---------------------------------------------------------------------


def _setup_logging(options: MountOptions, *, foreground: bool) -> None:
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
    # Even with debug: these libraries log request headers and URLs, credentials included.
    # The Azure SDK logs every request and response, headers and all, at INFO.
    for library in ("fsspec", "s3fs", "botocore", "aiobotocore", "urllib3", "aiohttp", "gcsfs", "adlfs",
                    "azure"):
        logging.getLogger(library).setLevel(logging.WARNING)


def _detach_stdio() -> None:
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    os.chdir("/")


def _notify_systemd(problem: str | None) -> None:
    if problem is not None:
        print(f"zarrfs: {problem}", file=sys.stderr)
        return
    _sd_notify(b"READY=1")


def _announce_metrics(address: str) -> None:
    """Where the metrics are (port 0 picked one): in the log, and to whoever waits on
    NOTIFY_SOCKET (systemd shows STATUS; `zarrfs.mount` reads X_ZARRFS_METRICS) before READY."""
    log.info("serving metrics on http://%s/metrics", address)
    _sd_notify(f"STATUS=metrics on http://{address}/metrics\nX_ZARRFS_METRICS={address}".encode())


def _notify_systemd_stopping() -> None:
    _sd_notify(b"STOPPING=1")


def _sd_notify(message: bytes) -> None:
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return
    if address.startswith("@"):
        address = "\0" + address[1:]
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock, contextlib.suppress(OSError):
        sock.sendto(message, address)
