"""Telling the kernel that what it caches is stale, without ever waiting on it."""

from __future__ import annotations

import errno
import logging
from collections.abc import Iterable

import pyfuse3

log = logging.getLogger("zarrfs.fuse")


def invalidate_attributes(inode: int) -> None:
    """Mark an inode's attributes stale. With a new mtime, the kernel's automatic data
    invalidation then drops its cached pages when a reader next looks (in the reader's
    context). Page invalidation asked for here would wait, uninterruptibly, for pages locked
    by requests queued for us; a daemon killed then could never exit and its mount would hang
    instead of failing, which the crash tests showed."""
    try:
        pyfuse3.invalidate_inode(inode, attr_only=True)
    except OSError as e:
        # ENOENT: the kernel has already forgotten the inode; nothing is cached.
        if e.errno != errno.ENOENT:
            log.warning("could not invalidate inode %d: %s", inode, e)


def invalidate_attributes_of(inodes: Iterable[int]) -> None:
    """`invalidate_attributes` of each inode: in one call, so that a caller on the request
    loop pays one trip to a worker thread for all of them (a write to `data` tells every
    view sharing its bytes)."""
    for inode in inodes:
        invalidate_attributes(inode)


def drop_pages(inode: int) -> None:
    """Drop the kernel's cached pages of an inode that is open with the page cache, after its
    bytes changed through another file. This waits for pages locked by requests in flight,
    which the daemon's other threads answer; should the daemon be killed meanwhile, the
    watchdog (zarrfs.daemon.watchdog) aborts the connection so that nothing hangs."""
    try:
        pyfuse3.invalidate_inode(inode, attr_only=False)
    except OSError as e:
        if e.errno != errno.ENOENT:
            log.warning("could not drop the cached pages of inode %d: %s", inode, e)


def store_pages(inode: int, offset: int, data: memoryview) -> None:
    """Put bytes into the kernel's page cache of an inode (FUSE_NOTIFY_STORE), uncopied:
    pyfuse3 takes any contiguous buffer, though it declares bytes, and lets go of the
    interpreter lock while the kernel copies."""
    pyfuse3.notify_store(inode, offset, data)  # type: ignore[arg-type]
