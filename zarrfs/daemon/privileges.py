"""`-o user=NAME` (`group=`): the daemon does its store I/O as the user it serves for, as sshfs
and mountpoint-s3 do, not as root.

A daemon started by root (fstab, systemd) with `user=NAME` opens the store, its disk cache
and every chunk as NAME from the start (`act`): a file NAME may not read fails its read
(EIO), and what it writes belongs to NAME. Root is taken back for the mount itself (`root`):
the real user stays NAME meanwhile, so the kernel records NAME as the mount's owner
(`user_id=`) and NAME's `fusermount3 -u` may unmount it, which is how the daemon unmounts
itself at SIGTERM. Then root is given up for good (`drop`), before the mount serves any
request. What serving needs of root was taken before: the metrics port (bound first), the log
file (open), the FUSE device (open), the kernel's readahead setting (opened in the root
window) and fusectl (mounted there; the connection's `abort` belongs to NAME).
"""

from __future__ import annotations

import contextlib
import grp
import logging
import os
import pwd
from collections.abc import Iterator
from dataclasses import dataclass

from ..errors import MountError

log = logging.getLogger("zarrfs")


@dataclass(frozen=True)
class Identity:
    """Who the daemon does its I/O as: a user and group, with the user's other groups."""

    name: str
    uid: int
    gid: int
    groups: tuple[int, ...]

    @classmethod
    def named(cls, user: str | None, group: str | None = None) -> Identity | None:
        """The identity `-o user=` (and `group=`) name; None when there is nothing to change
        (no user= given, or the daemon already runs as that user and group). MountError for an
        unknown user or group, or a daemon that is not root."""
        if user is None:
            return None
        name, uid, gid = _user(user)
        gid = gid if group is None else _group(group)
        if (uid, gid) == (os.geteuid(), os.getegid()):
            return None
        if os.geteuid() != 0:
            raise MountError(f"-o user={user}: only root may serve as another user")
        groups = tuple(os.getgrouplist(name, gid)) if name else (gid,)
        return cls(name or user, uid, gid, groups)

    def act(self) -> None:
        """Do every access as this identity from now on, keeping root as the saved user (to
        `root` the mount itself)."""
        os.setgroups(list(self.groups))
        os.setresgid(self.gid, self.gid, 0)
        os.setresuid(self.uid, self.uid, 0)

    @contextlib.contextmanager
    def root(self) -> Iterator[None]:
        """Root's rights for the mount (the real user stays this one: the mount's owner)."""
        os.setresuid(-1, 0, -1)
        try:
            yield
        finally:
            os.setresuid(-1, self.uid, -1)

    def drop(self) -> None:
        """Give root up for good: no saved user or group to take it back with."""
        with self.root():
            os.setresgid(self.gid, self.gid, self.gid)
        os.setresuid(self.uid, self.uid, self.uid)
        log.info("serving as user %s (uid %d, gid %d)", self.name, self.uid, self.gid)


def stats() -> dict[str, float]:
    """Who the daemon does its I/O as (`zarrfs stats`: `uid`, `gid`)."""
    return {"uid": float(os.geteuid()), "gid": float(os.getegid())}


def user_name(uid: int) -> str:
    """The name of user `uid` (its number where it has none)."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _user(user: str) -> tuple[str, int, int]:
    """The name, uid and primary group of `user`; a number without an entry in the user
    database is taken as it is, its group the same number (a container's consumers' uid)."""
    try:
        entry = pwd.getpwuid(int(user)) if user.isdigit() else pwd.getpwnam(user)
    except KeyError:
        if user.isdigit():
            return "", int(user), int(user)
        raise MountError(f"-o user={user}: no such user") from None
    return entry.pw_name, entry.pw_uid, entry.pw_gid


def _group(group: str) -> int:
    if group.isdigit():
        return int(group)
    try:
        return grp.getgrnam(group).gr_gid
    except KeyError:
        raise MountError(f"-o group={group}: no such group") from None
