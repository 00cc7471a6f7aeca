"""Directory modes given with mkdir and chmod: kept in memory for the mount's life, by inode
number (numbers follow a node across renames and are never reused: `inodes`), and shown by
getattr, less the mount's `umask=` (its ceiling for every file). The formats have no place for
a group's mode, so nothing is stored: a remount shows the mount's own modes again. With
`default_permissions` (implied by `allow_other`) the kernel enforces them, as for any
directory."""

from __future__ import annotations

import stat
import threading

import pyfuse3


class GivenModes:
    def __init__(self, umask: int) -> None:
        self._umask = umask
        self._lock = threading.Lock()
        self._modes: dict[int, int] = {}

    def give(self, inode: int, mode: int) -> None:
        with self._lock:
            self._modes[inode] = stat.S_IMODE(mode)

    def shown(self, attrs: pyfuse3.EntryAttributes) -> None:
        """`attrs` with the mode given for its inode, if one was."""
        with self._lock:
            given = self._modes.get(attrs.st_ino)
        if given is not None:
            attrs.st_mode = stat.S_IFMT(attrs.st_mode) | (given & ~self._umask)
