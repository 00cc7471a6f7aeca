"""Running a mount: check the mountpoint, open the array, mount, serve, flush, unmount.

Without `-f` the command forks a daemon and returns only when the mount is serving (or
prints why it could not mount). With `-f` it serves in the foreground and tells systemd
it is ready when NOTIFY_SOCKET is set.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import subprocess
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

import pyfuse3
import trio

from ..errors import MountError, ZarrfsError, missing_package
from ..fuse import ZarrOperations
from ..options import MountOptions
from ..store import one_line
from . import preload, reporting, watchdog
from .kernel_window import window_kb
from .lifecycle import Lifecycle
from .mountpoint import check_mountpoint, mount_device, readahead_setting, set_readahead
from .parent import Parent
from .privileges import Identity

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
    ready = _once(ready)
    try:
        life = Lifecycle(source, options)
    except MountError as e:
        ready(str(e))
        return 1
    with contextlib.ExitStack() as services:  # (the mount's own: stopped after the life cycle)
        try:
            with life:
                status = _serve_metered(life, mountpoint, ready, services)
        except Exception as e:
            # What failed as the user, where the user cannot reach the Python the daemon runs on:
            # that said in a line (the mount, if made, is gone: `_unmount`), not a traceback.
            reach = None if life.identity is None else preload.unreachable(life.identity.name, source)
            if reach is None:
                raise
            line = f"cannot mount {_public(source)}: {one_line(e)} ({reach})"
            log.error("%s", line)
            ready(line)
            return 1
    return status if life.stored else 1


def _serve_metered(life: Lifecycle[MountOptions], mountpoint: str, ready: Ready,
                   services: contextlib.ExitStack) -> int:
    if life.options.metrics is None:
        return _serve_with(life, mountpoint, ready, services, None)
    from .metrics import Metrics, MetricsError  # (prometheus_client: only when asked for)

    metrics = Metrics(life.source)
    try:
        # Before the store is opened: a port in use fails the mount at once, with its reason.
        metrics.serve(*life.options.metrics)
    except MetricsError as e:
        ready(str(e))
        return 1
    life.callback(metrics.close)
    return _serve_with(life, mountpoint, ready, services, metrics)


def _once(ready: Ready) -> Ready:
    """`ready`, called at most once (a failure after it was called is only logged)."""
    told = False

    def once(problem: str | None) -> None:
        nonlocal told
        if not told:
            told = True
            ready(problem)

    return once


def _serve_with(life: Lifecycle[MountOptions], mountpoint: str, ready: Ready, services: contextlib.ExitStack,
                metrics: Metrics | None) -> int:
    source, options = life.source, life.options
    try:
        opened = life.open(metrics)
    except ZarrfsError as e:
        # (the message may quote the URL)
        ready(_with_reach(_public(f"cannot mount {source}: {e}"), life.identity, source))
        return 1
    store, tree = opened.store, opened.tree
    operations = ZarrOperations(tree, options, read_only=store.read_only,
                                timeout=store.retry.deadline_seconds if store.bounded else None,
                                room=(lambda: None) if store.local_files is None else store.local_files.room,
                                timings=metrics, silence=store.answers.silence)
    parent = Parent.from_environment()  # (`zarrfs.mount`: the mount ends with its process)
    if parent is not None:
        services.callback(parent.leave_nothing, mountpoint)
    try:
        # /proc/mounts separates options with commas: none in the source shown there.
        with life.as_root():
            pyfuse3.init(operations, mountpoint, options.fuse_options(_public(source).replace(",", "_")))
    except (RuntimeError, OSError) as e:
        ready(f"cannot mount on {mountpoint}: {e}")
        return 1
    # The kernel's mount is made: from here on, whatever fails unmounts it, after the final
    # write-back (`start_serving`) and before the tree is closed.
    life.callback(lambda: _unmount(mountpoint))
    serving, readahead = False, None

    def on_serving() -> None:
        nonlocal serving
        serving = True
        life.serving()
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

    try:
        with life.as_root():  # (what serving needs of root, taken while it may be)
            readahead = readahead_setting(mountpoint)
            guard = _start_watchdog(mountpoint, life.identity)
        if guard is not None:
            services.callback(watchdog.stop, guard)
        life.start_serving()
        trio.run(operations.serve, mountpoint, on_serving)
    except OSError as e:
        if serving:
            raise
        # (unmounted at the end, before the command that waits for this daemon returns)
        ready(_with_reach(f"cannot serve on {mountpoint}: {one_line(e)}", life.identity, source))
        return 1
    finally:
        reporting.notify_systemd_stopping()
    return 0


def _unmount(mountpoint: str) -> None:
    with contextlib.suppress(Exception):
        pyfuse3.close(unmount=True)
    log.info("unmounted %s", mountpoint)


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


def _absolute_source(source: str) -> str:
    return source if "://" in source or "::" in source else os.path.abspath(source)


def _public(text: str) -> str:
    """A source (or a message naming one) as it may appear in logs: no credentials in URLs."""
    return re.sub(r"//[^/@\s]*@", "//", text)
