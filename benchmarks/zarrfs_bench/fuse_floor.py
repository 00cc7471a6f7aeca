#!/usr/bin/env python3
"""The floor of a FUSE daemon in Python: one file passed through by a bare pyfuse3 server (no
layers, no cache, no checks), `direct_io` and the `st_blksize` of `data.tif`, as zarrfs
serves it. A reader reading a local file through it pays what any pyfuse3 daemon pays on this
machine (the kernel's round trip, trio, the copy into the reply); what zarrfs takes beyond it
is zarrfs's own. As a sink (`sink`), it takes writes too, each stored into FILE as it comes
(a file on tmpfs: what any pyfuse3 daemon pays to take a writer's bytes).

    python fuse_floor.py FILE MOUNTPOINT BLKSIZE [cached|sink]   (serves FILE as
                                                                  MOUNTPOINT/file until unmounted)
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

NAME = b"file"
FILE_INODE = 2


def serve(source: str, mountpoint: str, blksize: int, cached: bool = False, sink: bool = False) -> None:
    """`cached`: through the page cache and the kernel's read-ahead, as `data` is served
    (else `direct_io`, as `data.tif`, and as zarrfs takes the writes of a file opened
    write-only). `sink`: writable, each write stored into `source` at once."""
    import pyfuse3
    import trio

    fd = os.open(source, os.O_RDWR if sink else os.O_RDONLY)
    size = os.fstat(fd).st_size
    reply = bytearray(4 << 20)  # (one request at a time: the reply is sent before the next)

    class Passthrough(pyfuse3.Operations):
        async def getattr(self, inode: int, ctx: object = None) -> pyfuse3.EntryAttributes:
            entry = pyfuse3.EntryAttributes()
            entry.st_ino = inode
            entry.st_blksize = blksize
            if inode == pyfuse3.ROOT_INODE:
                entry.st_mode, entry.st_size = stat.S_IFDIR | 0o755, 0
            else:
                entry.st_mode, entry.st_size = stat.S_IFREG | (0o644 if sink else 0o444), size
            return entry

        async def lookup(self, parent: int, name: bytes, ctx: object = None) -> pyfuse3.EntryAttributes:
            if parent != pyfuse3.ROOT_INODE or name != NAME:
                raise pyfuse3.FUSEError(errno.ENOENT)
            return await self.getattr(FILE_INODE)

        async def open(self, inode: int, flags: int, ctx: object) -> pyfuse3.FileInfo:
            return pyfuse3.FileInfo(fh=inode, direct_io=not cached)

        async def read(self, fh: int, offset: int, length: int) -> memoryview:  # type: ignore[override]
            view = memoryview(reply)[:length]
            return view[: os.preadv(fd, [view], offset)]

        async def write(self, fh: int, offset: int, buf: bytes) -> int:
            if not sink:
                raise pyfuse3.FUSEError(errno.EROFS)
            return os.pwrite(fd, buf, offset)

        async def flush(self, fh: int) -> None:
            pass

        async def fsync(self, fh: int, datasync: bool) -> None:
            os.fsync(fd)

    options = set(pyfuse3.default_options)
    options.add("fsname=fuse-floor")
    pyfuse3.init(Passthrough(), mountpoint, options)
    try:
        trio.run(pyfuse3.main)
    finally:
        pyfuse3.close()


@contextlib.contextmanager
def passed_through(source: Path, mountpoint: Path, blksize: int,
                   window_kb: int | None = None, sink: bool = False) -> Iterator[Path]:
    """`source` served by the bare server at `mountpoint`; yields the served file's path.
    `window_kb`: served through the page cache with this kernel read-ahead window. `sink`:
    written into (its writes stored into `source`)."""
    mountpoint.mkdir(parents=True, exist_ok=True)
    mode = ["sink"] if sink else [] if window_kb is None else ["cached"]
    server = subprocess.Popen([sys.executable, __file__, str(source), str(mountpoint), str(blksize), *mode])
    served = mountpoint / NAME.decode()
    try:
        deadline = time.monotonic() + 30
        while not served.exists():
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the bare FUSE server did not mount")
            time.sleep(0.05)
        if window_kb is not None:
            from .common import kernel_window_setting  # (not at the top: this file also runs as a script)
            kernel_window_setting(mountpoint).write_text(str(window_kb))
        yield served
    finally:
        subprocess.run(["fusermount3", "-u", str(mountpoint)], check=False)
        server.wait(timeout=30)


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2], int(sys.argv[3]), cached=sys.argv[4:] == ["cached"],
          sink=sys.argv[4:] == ["sink"])
