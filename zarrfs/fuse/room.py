"""What `df` shows of a mount: the room the store's own filesystem has (a local store), or a
large free space (a remote store, which has no such limit to report: s3fs-fuse and gcsfuse do
the same). A read-only mount has none available to write."""

from __future__ import annotations

import os

import pyfuse3

BLOCK = 4096
REMOTE_ROOM = 1 << 50  # 1 PiB


def statvfs_data(room: os.statvfs_result | None, read_only: bool) -> pyfuse3.StatvfsData:
    stats = pyfuse3.StatvfsData()
    stats.f_bsize = stats.f_frsize = BLOCK
    stats.f_namemax = 255
    if room is None:
        stats.f_blocks = stats.f_bfree = stats.f_bavail = REMOTE_ROOM // BLOCK
        stats.f_files = stats.f_ffree = stats.f_favail = REMOTE_ROOM // BLOCK
    else:
        stats.f_blocks = room.f_blocks * room.f_frsize // BLOCK
        stats.f_bfree = room.f_bfree * room.f_frsize // BLOCK
        stats.f_bavail = room.f_bavail * room.f_frsize // BLOCK
        stats.f_files, stats.f_ffree, stats.f_favail = room.f_files, room.f_ffree, room.f_favail
    if read_only:
        stats.f_bavail = stats.f_favail = 0
    return stats
