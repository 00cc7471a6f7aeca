"""Times given with utimensat (`touch -d`, `cp -p`, `rsync -t`): kept in memory for the mount's
life, by inode number (numbers follow a node across renames and are never reused: `inodes`),
and shown by getattr. The formats have no place for a file's times, so nothing is stored: a
remount shows the mount's own time again. A write or a resize of the file after the times
were given shows its mtime advancing, as on any filesystem."""

from __future__ import annotations

import threading

import pyfuse3


class GivenTimes:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._atimes: dict[int, int] = {}
        self._mtimes: dict[int, int] = {}

    def give(self, inode: int, attr: pyfuse3.EntryAttributes, fields: pyfuse3.SetattrFields) -> None:
        """What a setattr sets of the times (the kernel has turned UTIME_NOW into a time)."""
        with self._lock:
            if fields.update_atime:
                self._atimes[inode] = attr.st_atime_ns
            if fields.update_mtime:
                self._mtimes[inode] = attr.st_mtime_ns

    def written(self, inode: int) -> None:
        """The file changed: its mtime is the mount's again (it advanced with the change)."""
        with self._lock:
            self._mtimes.pop(inode, None)

    def shown(self, inode: int, attrs: pyfuse3.EntryAttributes) -> None:
        """`attrs` (the mount's own times) with the times given for `inode` in their place."""
        with self._lock:
            attrs.st_atime_ns = self._atimes.get(inode, attrs.st_atime_ns)
            attrs.st_mtime_ns = self._mtimes.get(inode, attrs.st_mtime_ns)
