"""A local store stays inside its root: a symbolic link below the root is followed while it
resolves inside the root (or below a place `-o references_allow=` names, the rule of reference
sets: `store.targets.TargetPolicy`), and only regular files are read.

The store is often served by root to other users (`allow_other`) and written by yet others: a
link `c/0 -> /root/secret` or a group directory linked to `/etc` must not hand their bytes to
whoever reads the mount, as Samba's `wide links = no` and nginx's `disable_symlinks` refuse
them. A FIFO where a chunk should be would block its read (and the unmount) for ever.

The cost is in the open a read makes anyway: openat2 with RESOLVE_NO_SYMLINKS on the path
below the root's real path succeeds for a path without links, and fails with ELOOP at the
first link (measured here: the system calls of a 4 KiB read 4.5 -> 5.4 us, `files.read` of
it 5.4 -> 6.9 us, the best of 7 rounds of 50,000; a stat, `describe`, 2.3 -> 5.7 us). Only
then is the path resolved (realpath, ~20 us) and checked against the rule, and the resolved
path opened again without links, so a link swapped in meanwhile is refused, not followed.
O_NONBLOCK opens a FIFO without waiting for a writer; the fstat the read needs anyway
refuses anything but a regular file. Without openat2 (a kernel before 5.6 or a seccomp filter
refusing it) every open resolves first.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import logging
import os
import stat
from typing import Any

from ...errors import RefusedKey
from ..targets import Place, TargetPolicy, Where
from ..values import Opened

log = logging.getLogger("zarrfs")

_OPENAT2 = 437  # (the same number on every architecture: added after the numbers were unified)
_RESOLVE_NO_MAGICLINKS, _RESOLVE_NO_SYMLINKS, _RESOLVE_BENEATH = 0x02, 0x04, 0x08
_AT_FDCWD = -100
READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
_KINDS = {stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket", stat.S_IFCHR: "a character device",
          stat.S_IFBLK: "a block device", stat.S_IFLNK: "a symbolic link"}


def generation_of(status: os.stat_result) -> str:
    """One version of a file (see `files`)."""
    return f"{status.st_ino}-{status.st_size}-{status.st_mtime_ns}"


class _How(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


def _openat2() -> Any:
    """libc's syscall(2), if openat2 answers through it here."""
    try:
        call = ctypes.CDLL(None, use_errno=True).syscall
    except (OSError, AttributeError):
        return None
    call.restype = ctypes.c_long
    call.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]
    how = _How(os.O_PATH | os.O_CLOEXEC, 0, _RESOLVE_NO_SYMLINKS)
    fd = call(_OPENAT2, _AT_FDCWD, b"/", ctypes.byref(how), ctypes.sizeof(how))
    if fd < 0:
        log.debug("openat2 unavailable (%s): every local open resolves its path first",
                  os.strerror(ctypes.get_errno()))
        return None
    os.close(fd)
    return call


_SYSCALL = _openat2()
DIRECTORY_FLAGS, PATH_FLAGS = READ_FLAGS | os.O_DIRECTORY, os.O_PATH | os.O_CLOEXEC
WORKING_FLAGS = PATH_FLAGS | os.O_DIRECTORY  # a directory to make and replace entries in
# openat2's arguments by open flags, made once (a read's open is on the hot path).
_HOWS = {flags: (how, ctypes.byref(how), ctypes.sizeof(how))
         for flags in (READ_FLAGS, DIRECTORY_FLAGS, PATH_FLAGS, WORKING_FLAGS)
         for how in [_How(flags, 0, _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS)]}
_BELOW = next((how, ctypes.byref(how), ctypes.sizeof(how)) for how in [
    _How(READ_FLAGS, 0, _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS | _RESOLVE_BENEATH)])


def open_below(directory: int, key: str) -> Opened:
    """The regular file `key` below the open `directory` (a `Root.lent`), opened to read if no
    component of it is a link and it stays below (what `Root.open` opens without resolving).
    FileNotFoundError: none; any other OSError (a link, a FIFO, no permission): the store's own
    open is to decide (it follows links that stay inside, and says why it refuses)."""
    _, how, size = _BELOW
    fd: int = _SYSCALL(_OPENAT2, directory, os.fsencode(key), how, size)
    if fd < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), key)
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", key)
    except BaseException:
        os.close(fd)
        raise
    return Opened(fd, status.st_size, generation_of(status))


def _open_without_links(path: str, flags: int, directory: int = _AT_FDCWD) -> int:
    """`path` (relative to the open `directory`, if given) opened if no component of it is a
    symbolic link; OSError(ELOOP) at one."""
    if _SYSCALL is None:  # (the last component only: see `Root.open`)
        return os.open(path, flags | os.O_NOFOLLOW, dir_fd=None if directory == _AT_FDCWD else directory)
    _, how, size = _HOWS[flags]
    fd: int = _SYSCALL(_OPENAT2, directory, os.fsencode(path), how, size)
    if fd < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), path)
    return fd


class Root:
    """The root directory of a local store, and where its links may lead."""

    def __init__(self, path: str, allowed: tuple[str, ...] = ()) -> None:
        self.path = path.rstrip("/") or "/"  # as the store names it
        self.real = os.path.realpath(self.path)
        # A path below the root, as the store names it and as openat2 may open it.
        self._below, self._real_below = self.path.rstrip("/") + "/", self.real.rstrip("/") + "/"
        places = tuple(Place.parse(prefix) for prefix in allowed)
        self.policy = TargetPolicy(Where("file", self.real, Place("file", "", self.real)), places,
                                   kind="link")

    def key(self, path: str) -> str:
        """The key `path` names below the root (for messages)."""
        return path[len(self.path) + 1 :] if path.startswith(self.path + "/") else path

    def open(self, path: str, *, directory: bool = False) -> tuple[int, os.stat_result]:
        """`path` opened to read, and its status: a regular file (`directory`: a directory)
        reached through links that stay inside; RefusedKey (a StoreError: EIO) naming the key
        otherwise, FileNotFoundError when there is none. A PermissionError is refused too: a chunk
        the daemon's user may not read fails its read (EIO), it is not the reader's EACCES."""
        try:
            fd = self._open(path, DIRECTORY_FLAGS if directory else READ_FLAGS)
        except PermissionError as e:
            raise RefusedKey(self.key(path), f"{e.strerror} (the daemon reads as {_user()})") from None
        except OSError as e:
            if e.errno != errno.ENXIO:  # (what an open of a socket answers)
                raise
            raise RefusedKey(self.key(path), "a socket, not a regular file: not read") from None
        try:
            status = os.fstat(fd)
            if not stat.S_ISREG(status.st_mode):
                self._check_kind(path, status, directory)
        except BaseException:
            os.close(fd)
            raise
        return fd, status

    def describe(self, path: str) -> tuple[int, str]:
        """The size and generation (`files.generation_of`) of what `path` leads to
        (FileNotFoundError: nothing). A link leading outside is described by where it leads,
        size 0: nothing of its target is told, and its read is refused."""
        try:
            fd = self._open(path, PATH_FLAGS)
        except RefusedKey:
            return 0, f"outside:{os.path.realpath(path)}"
        try:
            status = os.fstat(fd)
        finally:
            os.close(fd)
        return status.st_size, generation_of(status)

    def follows(self, path: str) -> bool:
        """Whether a listing follows the symbolic link at `path` (it stays inside)."""
        try:
            self.checked(path)
        except RefusedKey:
            return False
        return True

    def checked(self, path: str) -> str:
        """The real path `path` resolves to, or RefusedKey when it leads outside (a path with
        a link on the way: rare, and resolved every time)."""
        real = os.path.realpath(path)
        try:
            self.policy.checked(self.key(path), real)
        except PermissionError as e:
            raise RefusedKey(self.key(path), str(e)) from None
        return real

    def directory(self, path: str) -> int:
        """The directory at `path` opened to work in (entries made, renamed and removed
        relative to it: whatever is swapped in on the way afterwards, they stay in this
        directory), reached through links that stay inside; RefusedKey otherwise,
        FileNotFoundError when there is none."""
        if path.rstrip("/") == self.path.rstrip("/"):
            return _open_without_links(self.real, WORKING_FLAGS)  # (resolved when the store opened)
        return self._open(path, WORKING_FLAGS)

    def lent(self, path: str) -> int | None:
        """The directory at `path` opened for another process to read the files below it
        itself (`open_below`), reached through links that stay inside; None without openat2
        (it could not keep to the rules) or when there is no such directory."""
        if _SYSCALL is None:
            return None
        try:
            return self._open(path, WORKING_FLAGS)
        except (OSError, RefusedKey):
            return None

    def _open(self, path: str, flags: int) -> int:
        # (no `..` in it: one would climb out without a link)
        if _SYSCALL is not None and ".." not in path and path.startswith(self._below):
            try:
                return _open_without_links(self._real_below + path[len(self._below) :], flags)
            except OSError as e:
                if e.errno == errno.ENAMETOOLONG:
                    return self._open_stepwise(path[len(self._below) :], flags)
                if e.errno != errno.ELOOP:
                    raise
        real = self.checked(path)  # (a link on the way, or no openat2: resolved, then checked)
        try:
            return _open_without_links(real, flags)
        except OSError as e:
            if e.errno != errno.ELOOP:
                raise
            raise RefusedKey(self.key(path), "a link changed while it was opened: not followed") from None

    def _open_stepwise(self, relative: str, flags: int) -> int:
        """`relative` (below the root) opened one name at a time, each relative to the
        directory before it: a deep path longer than PATH_MAX as a whole (16 names of 255
        bytes under the store's root) opens as long as each name is valid. Links refused, as
        by `_open`; only for paths the kernel will not take whole (one open per name)."""
        *parents, last = relative.split("/")
        directory = _open_without_links(self.real, WORKING_FLAGS)
        try:
            for name in parents:
                inner = _open_without_links(name, WORKING_FLAGS, directory)
                os.close(directory)
                directory = inner
            return _open_without_links(last, flags, directory)
        finally:
            os.close(directory)

    def _check_kind(self, path: str, status: os.stat_result, directory: bool) -> None:
        kind = stat.S_IFMT(status.st_mode)
        if kind == stat.S_IFREG or (directory and kind == stat.S_IFDIR):
            return
        if kind == stat.S_IFDIR:
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
        what = _KINDS.get(kind, "not a regular file")
        raise RefusedKey(self.key(path), f"{what}, not a regular file: not read")


def _user() -> str:
    """The daemon's user, as a message names it."""
    with contextlib.suppress(KeyError, ImportError):
        import pwd

        return f"user {pwd.getpwuid(os.geteuid()).pw_name}"
    return f"uid {os.geteuid()}"


def opened(root: Root | None, path: str) -> Opened:
    """The file at `path` opened as `Root.open` opens it (FileNotFoundError: none)."""
    assert root is not None  # (local stores)
    fd, status = root.open(path)
    return Opened(fd, status.st_size, generation_of(status))
