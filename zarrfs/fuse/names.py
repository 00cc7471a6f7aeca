"""Names as the kernel hands them over: FUSE passes names of up to 1024 bytes (the kernel does
not check NAME_MAX for a filesystem of its own), so the mount checks them itself, before any
store request, and answers ENAMETOOLONG as a local filesystem would."""

from __future__ import annotations

import errno

import pyfuse3

NAME_MAX = 255  # bytes, as every Linux filesystem's (and `statfs` says: `room`)


def name_text(name: bytes) -> str:
    """A directory entry's name as the tree takes it; ENAMETOOLONG over NAME_MAX bytes."""
    if len(name) > NAME_MAX:
        raise pyfuse3.FUSEError(errno.ENAMETOOLONG)
    return name.decode("utf-8", "replace")
