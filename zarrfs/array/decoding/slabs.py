"""Slabs in shared memory: a reader's slab (rows of the array in file order) that the decoding
processes write into and the daemon's replies read from. Each is an anonymous memory file
(memfd): it has no name (nothing in /dev/shm to leave behind), and its memory is the
kernel's to free once the last process holding it (the daemon, a worker) closes or ends.
Its pages are counted once however many processes map them (PSS)."""

from __future__ import annotations

import itertools
import mmap
import os
import threading
from collections.abc import Callable

import numpy as np

_IDS = itertools.count(1)


class SharedSlab:
    """`nbytes` of shared memory, mapped here (`map`: `array` makes a flat uint8 array of
    it); `fd` sends it."""

    def __init__(self, nbytes: int) -> None:
        self.id = next(_IDS)
        self.nbytes = nbytes
        # (named for the daemon: /proc/PID/fd shows whose it is)
        self.fd = os.memfd_create(f"zarrfs-slab-{os.getpid()}-{self.id}", os.MFD_CLOEXEC)
        try:
            os.ftruncate(self.fd, nbytes)
            self.map = mmap.mmap(self.fd, nbytes)
        except BaseException:
            os.close(self.fd)
            raise
        self._lock = threading.Lock()

    def array(self) -> np.ndarray:
        return np.frombuffer(self.map, dtype=np.uint8)

    def close(self) -> None:
        """Its descriptor closed: its memory lives on while an `array` of it does."""
        with self._lock:
            if self.fd >= 0:
                os.close(self.fd)
                self.fd = -1


class SlabKeeper:
    """The shared slabs of a mount, by the array each is lent as (`make`: what the cache lends
    readers; `forgotten`: what it frees), so that a job can name its slab to a worker."""

    def __init__(self, let_go: Callable[[SharedSlab], None]) -> None:
        self._let_go = let_go  # (the workers unmap it)
        self._slabs: dict[int, SharedSlab] = {}
        self._lock = threading.Lock()

    def make(self, nbytes: int) -> np.ndarray:
        """A slab's array (the keeper holds no reference to it: the cache counts them)."""
        slab = SharedSlab(nbytes)
        array = slab.array()
        with self._lock:
            self._slabs[id(array)] = slab
        return array

    def of(self, array: np.ndarray) -> SharedSlab | None:
        """The shared slab `array` is (None: not one of them)."""
        with self._lock:
            found = self._slabs.get(id(array))
        base: object = array.base  # (a view of the mapping: numpy keeps the buffer's memoryview)
        mapped = base.obj if isinstance(base, memoryview) else base
        return found if found is not None and mapped is found.map else None

    def forgotten(self, array: np.ndarray) -> None:
        with self._lock:
            slab = self._slabs.pop(id(array), None)
        if slab is not None:
            self._let_go(slab)
