"""Which bytes of a local file are in the page cache (mincore), for reads that must not wait
on a disk.

A read with RWF_NOWAIT stops short of bytes that are cached when the kernel would start
something first: a readahead mark left by an earlier sequential reader (`cat`, `cp`, another
Zarr library), or the last, partly written folio of a file just written. Measured here: 506 of
512 cached chunk files after a `cat`, 9 of 24 files just written by TensorStore. Asking the
page cache tells those apart from bytes that are really on disk.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import mmap
from typing import Any

log = logging.getLogger("zarrfs")

MAP_FAILED = ctypes.c_void_p(-1).value


def _libc() -> Any:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                              ctypes.c_int, ctypes.c_long]
        libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    except (OSError, AttributeError) as e:  # (not a libc with mincore: nothing is known cached)
        log.debug("mincore unavailable: %s", e)
        return None
    return libc


LIBC = _libc()


def cached(fd: int, start: int, length: int) -> bool:
    """Whether bytes [start, start + length) of the open file `fd` are all in the page cache.
    The file is mapped only to ask: no byte of it is touched (a file cut short meanwhile
    cannot fault)."""
    if length <= 0:
        return True
    if LIBC is None:
        return False
    first = start - start % mmap.PAGESIZE
    span = start + length - first
    address = LIBC.mmap(None, span, mmap.PROT_READ, mmap.MAP_SHARED, fd, first)
    if address in (None, MAP_FAILED):
        return False
    try:
        pages = (ctypes.c_ubyte * -(-span // mmap.PAGESIZE))()
        return LIBC.mincore(address, span, pages) == 0 and all(page & 1 for page in pages)
    finally:
        LIBC.munmap(address, span)
