"""Running a mount: check the mountpoint, open the array, mount, serve, flush, unmount.

Without `-f` the command forks a daemon and returns only when the mount is serving (or
prints why it could not mount). With `-f` it serves in the foreground and tells systemd
it is ready when NOTIFY_SOCKET is set.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import re
import subprocess
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

import pyfuse3
import trio

from ..array import DecodePool
from ..errors import MountError, ZarrfsError, missing_package
from ..fuse import ZarrOperations
from ..options import MountOptions
from ..store import one_line
from ..store.observe import Observers, RequestLog, StoreObserver
from . import preload, privileges, reporting, watchdog
from .kernel_window import window_kb
from .memory import Trimmer, bound_malloc
from .mountpoint import check_mountpoint, mount_device, readahead_setting, set_readahead
from .parent import Parent
from .privileges import Identity
from .served import decoding, final_flush, open_tree, opened_store, remove_temporaries, shared_of

if TYPE_CHECKING:
    from .metrics import Metrics

log = logging.getLogger("zarrfs")

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
        reporting.setup_logging(options, foreground=True)
        return _serve(source, mountpoint, options, reporting.notify_systemd)
    return _daemonize(source, mountpoint, options)


def _daemonize(source: str, mountpoint: str, options: MountOptions) -> int:
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        os.setsid()
        reporting.setup_logging(options, foreground=False)
        reported = False

        def ready(problem: str | None) -> None:
            nonlocal reported
            reported = True
            os.write(write_end, b"OK\n" if problem is None else problem.encode() + b"\n")
            os.close(write_end)
            if problem is None:
                reporting.detach_stdio()

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
    if identity is None:
        with decoding(None) as decoders:
            return _serve_metered(source, mountpoint, options, ready, None, decoders)
    preload.before_acting(source, options.storage_options)  # (as root: see preload)
    ready = _once(ready)
    try:
        with decoding(identity) as decoders:
            return _serve_metered(source, mountpoint, options, ready, identity, decoders)
    except Exception as e:
        # What failed as the user, where the user cannot reach the Python the daemon runs on:
        # that said in a line (the mount, if made, is gone: `_serve_with`), not a traceback.
        reach = preload.unreachable(identity.name, source)
        if reach is None:
            raise
        line = f"cannot mount {_public(source)}: {one_line(e)} ({reach})"
        log.error("%s", line)
        ready(line)
        return 1


def _serve_metered(source: str, mountpoint: str, options: MountOptions, ready: Ready,
                   identity: Identity | None, decoders: DecodePool | None) -> int:
    if options.metrics is None:
        return _serve_with(source, mountpoint, options, ready, None, identity, decoders)
    from .metrics import Metrics, MetricsError  # (prometheus_client: only when asked for)

    metrics = Metrics(source)
    try:
        # Before the store is opened: a port in use fails the mount at once, with its reason.
        metrics.serve(*options.metrics)
    except MetricsError as e:
        ready(str(e))
        return 1
    try:
        return _serve_with(source, mountpoint, options, ready, metrics, identity, decoders)
    finally:
        metrics.close()


def _once(ready: Ready) -> Ready:
    """`ready`, called at most once (a failure after it was called is only logged)."""
    told = False

    def once(problem: str | None) -> None:
        nonlocal told
        if not told:
            told = True
            ready(problem)

    return once


def _serve_with(source: str, mountpoint: str, options: MountOptions, ready: Ready,
                metrics: Metrics | None, identity: Identity | None, decoders: DecodePool | None) -> int:
    if identity is not None:
        identity.act()  # (the store, its disk cache and the tree opened as the user served)
        preload.as_user(identity)
    trim = bound_malloc()
    try:
        store = opened_store(source, options, _observer(metrics))
    except ZarrfsError as e:
        ready(_with_reach(_public(f"cannot mount {source}: {e}"), identity, source))
        return 1
    shared = shared_of(store, options, decoders, trim)
    if metrics is not None:
        metrics.watch(shared)
    try:
        tree = open_tree(store, shared, options.layout, rechecks=options.recheck is not None)
    except ZarrfsError as e:
        shared.close()
        ready(_with_reach(_public(f"cannot mount {source}: {e}"), identity, source))  # (may quote the URL)
        return 1
    operations = ZarrOperations(tree, options, read_only=store.read_only,
                                timeout=store.retry.deadline_seconds if store.bounded else None,
                                room=(lambda: None) if store.local_files is None else store.local_files.room,
                                timings=metrics, silence=store.answers.silence)
    parent = Parent.from_environment()  # (`zarrfs.mount`: the mount ends with its process)
    try:
        # /proc/mounts separates options with commas: none in the source shown there.
        with _as_root(identity):
            pyfuse3.init(operations, mountpoint, options.fuse_options(_public(source).replace(",", "_")))
    except (RuntimeError, OSError) as e:
        ready(f"cannot mount on {mountpoint}: {e}")
        tree.close()
        shared.close()
        return 1
    serving, readahead = False, None

    def on_serving() -> None:
        nonlocal serving
        serving = True
        # What the daemon made to start (modules, codecs, store clients: some 10^5 objects)
        # lives as long as it does: a full collection walking it stalled a read for 40-60 ms
        # (a warm 128 MiB `dd` from the disk cache: 1 of 4 of its time). Left out of them.
        gc.freeze()
        if decoders is not None:
            decoders.start()
        set_readahead(readahead, window_kb(options, tree))
        log.info("mounted %s on %s%s", _public(source), mountpoint,
                 " (read-only)" if operations.read_only else "")
        if operations.read_only and not options.read_only:
            log.warning("%s cannot be written (a read-only source, or no permission to write "
                        "there): mounted read-only", _public(source))
        if metrics is not None:
            reporting.announce_metrics(metrics.address)
        ready(None)
        if parent is not None:
            parent.watch()
        if not operations.read_only:
            remove_temporaries(store)

    # The kernel's mount is made: from here on, whatever fails unmounts it (`finally`).
    guard = trimmer = None
    status = 0
    try:
        with _as_root(identity):  # (what serving needs of root, taken while it may be)
            readahead = readahead_setting(mountpoint)
            guard = _start_watchdog(mountpoint, identity)
        if identity is not None:
            identity.drop()  # (before the first request is read)
        shared.more_stats.append(privileges.stats)
        trimmer = Trimmer(trim, shared.counters.activity) if trim else None
        trio.run(operations.serve, mountpoint, on_serving)
    except OSError as e:
        if serving:
            raise
        # (unmounted below, before the command that waits for this daemon returns)
        ready(_with_reach(f"cannot serve on {mountpoint}: {one_line(e)}", identity, source))
        status = 1
    finally:
        if trimmer is not None:
            trimmer.stop()
        reporting.notify_systemd_stopping()
        if not final_flush(tree):
            status = 1
        with contextlib.suppress(Exception):
            pyfuse3.close(unmount=True)
        tree.close()
        shared.close()
        store.close()
        log.info("unmounted %s", mountpoint)
        if guard is not None:
            watchdog.stop(guard)
        if parent is not None:
            parent.leave_nothing(mountpoint)
    return status


def _observer(metrics: Metrics | None) -> StoreObserver | None:
    """What watches the store's operations: the metrics, and the request log when asked for
    (ZARRFS_REQUEST_LOG), both, or nothing."""
    watching = [o for o in (metrics, RequestLog.from_environment()) if o is not None]
    return None if not watching else watching[0] if len(watching) == 1 else Observers(*watching)


def _failure(e: BaseException) -> str:
    """What stopped the daemon, in a line; a missing package with the extra that installs it."""
    return missing_package(e) or one_line(e)


def _start_watchdog(mountpoint: str, identity: Identity | None) -> subprocess.Popen[bytes] | None:
    """The mount's watchdog, started as root (fusectl mounted: call it with root's rights),
    before serving as a user who may not run this Python: it becomes that user once started."""
    device = mount_device(mountpoint)
    ids = None if identity is None else (identity.uid, identity.gid)
    guard = watchdog.start(os.getpid(), device.split(":")[-1], ids) if device else None
    if guard is None:
        log.warning("no watchdog (fusectl is not mounted on %s): should the daemon be killed "
                    "while it drops cached pages, the mount may hang until aborted there",
                    watchdog.CONNECTIONS)
    return guard


def _with_reach(problem: str, identity: Identity | None, source: str) -> str:
    """`problem` of a daemon acting as a user, and what the user cannot reach (a local source,
    the Python the daemon runs on), if anything: one line."""
    reach = None if identity is None else preload.unreachable(identity.name, source)
    return problem if reach is None else f"{problem} ({reach})"


def _as_root(identity: Identity | None) -> contextlib.AbstractContextManager[None]:
    """Root's rights while the daemon acts as a user who may take them back (nothing to take
    without one)."""
    return contextlib.nullcontext() if identity is None else identity.root()


def _absolute_source(source: str) -> str:
    return source if "://" in source or "::" in source else os.path.abspath(source)


def _public(text: str) -> str:
    """A source (or a message naming one) as it may appear in logs: no credentials in URLs."""
    return re.sub(r"//[^/@\s]*@", "//", text)
