"""Local files: reads that know which version of a file they read, atomic replacement, and
compare-and-swap between processes (and machines, on a network filesystem).

Every open goes through the store's `confined.Root`: links that lead outside the root are
not followed, and only regular files are read.

A put writes a temporary file, fsyncs it and renames it over the key, so a reader never sees
half an object. A generation names one version of a file: its inode (every put makes a new
one), size and modification time (set to the nanosecond by our puts).

Compare-and-swap needs no lock files: a conditional replace or delete takes `flock` on the
file it expects (and checks that this is still the file at the key, since a writer may have
renamed another over it while it waited), compares the generation, then renames or unlinks;
a write that expects no file links its temporary file to the key, which fails if one exists.
Readers never wait. flock and link are atomic on NFS too, so the protocol holds between
machines.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import random
import shutil
import stat
import time
from collections.abc import Iterator

from ...errors import ConflictError
from ..values import TEMP_PREFIX, Payload, Versioned, pieces
from . import page_cache
from .confined import WORKING_FLAGS, Root, generation_of

RENAME_EXCHANGE = 2  # (linux/fs.h; Python's os has no renameat2)
_LIBC = ctypes.CDLL(None, use_errno=True)


__all__ = ["generation_of"]  # (of `confined`, where `Root.describe` uses it too)


def read_cached(root: Root, path: str, start: int, into: memoryview) -> str | None:
    """Fill `into` from byte `start` of the file at `path` if the page cache holds every byte
    (no wait on a disk); its generation, or None when it would wait, is shorter, or is gone.
    The path's lookup is the one step that may touch the disk: callers use it for files they
    have just looked at (located), whose directory entries are cached."""
    found = _fill_cached(root, path, start, into)
    return None if found is None else found[1]


def read_edge_cached(root: Root, path: str, into: memoryview, *, at_end: bool) -> tuple[int, str] | None:
    """Fill `into` with the first bytes of the file at `path` (`at_end`: its last) as
    `read_cached` does: the file's size and generation, or None."""
    return _fill_cached(root, path, None if at_end else 0, into)


def _fill_cached(root: Root, path: str, start: int | None, into: memoryview) -> tuple[int, str] | None:
    """`read_cached` from `start` (None: where `into` ends at the file's end): the file's
    size and generation."""
    try:
        fd, status = root.open(path)
    except OSError:  # (a refused link or FIFO too: the read that follows says why)
        return None
    try:
        at = status.st_size - len(into) if start is None else start
        if at < 0 or not _fill_now(fd, at, into):
            return None
        return status.st_size, generation_of(status)
    except OSError:
        return None
    finally:
        os.close(fd)


def read_whole_cached(root: Root, path: str, into: memoryview) -> tuple[int, str | None] | None:
    """Fill the start of `into` with the whole file at `path` if it fits and the page cache
    holds every byte (`read_cached`; the path's lookup may touch the disk, as a stat of it
    would): its size and generation; (-1, None) when there is no such file; None when it would
    wait or does not fit."""
    try:
        fd, status = root.open(path)
    except FileNotFoundError:
        return -1, None
    except OSError:
        return None
    try:
        size = status.st_size
        return (size, generation_of(status)) if size <= len(into) and _fill_now(fd, 0, into[:size]) else None
    except OSError:
        return None
    finally:
        os.close(fd)


def _fill_now(fd: int, start: int, into: memoryview) -> bool:
    """Whether all of `into` was read from byte `start` of `fd` without a wait on a disk."""
    done = _read_now(fd, start, into)
    if done is not None and done < len(into) and page_cache.cached(fd, start + done, len(into) - done):
        done += os.preadv(fd, [into[done:]], start + done)  # (cached: see page_cache)
    return done == len(into)


def _read_now(fd: int, start: int, into: memoryview) -> int | None:
    """How many bytes an RWF_NOWAIT read reads; None on a filesystem without it (a network
    filesystem may wait on its server even for cached bytes: it is never read here)."""
    try:
        return os.preadv(fd, [into], start, os.RWF_NOWAIT)
    except BlockingIOError:
        return 0
    except OSError:  # (EOPNOTSUPP)
        return None


def read(root: Root, path: str, start: int | None = None, length: int | None = None) -> Versioned:
    fd, status = root.open(path)
    try:
        if start is not None and length is not None:
            return Versioned(os.pread(fd, length, start), generation_of(status))
        size = status.st_size
        data = os.pread(fd, size, 0)
        while len(data) < size:  # a short read of a regular file: keep going
            more = os.pread(fd, size - len(data), len(data))
            if not more:
                break
            data += more
        return Versioned(data, generation_of(status))
    finally:
        os.close(fd)


def write_atomically(root: Root, path: str, data: Payload, sync_directory: bool) -> str:
    """Replace `path` with `data` (durable when it returns, but for the directory entry when
    `sync_directory` is False); the new generation. The directory must lie inside `root`
    (a link at `path` itself is replaced, never followed)."""
    with _working_in(root, path, make=True) as (directory, name):
        temp, new = _write_temporary(directory, name, data)
        try:
            os.replace(temp, name, src_dir_fd=directory, dst_dir_fd=directory)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=directory)
            raise
        if sync_directory:
            fsync_directory(".", dir_fd=directory)
    return new


def replace_if(root: Root, path: str, data: Payload, sync_directory: bool,
               expect: str | None) -> str:
    """`write_atomically` if `path` is still generation `expect` (None: absent), else
    ConflictError."""
    if expect is None:
        return _create(root, path, data, sync_directory)
    with _holding(root, path, expect):
        return write_atomically(root, path, data, sync_directory)


def delete_if(root: Root, path: str, expect: str | None) -> bool:
    try:
        with _working_in(root, path) as (directory, name):
            if expect is None:
                if _exists(directory, name):
                    raise ConflictError(name)
                return True
            with _holding(root, path, expect):
                os.unlink(name, dir_fd=directory)
    except FileNotFoundError:  # (no directory: nothing there)
        if expect is not None:
            raise ConflictError(os.path.basename(path)) from None
    return True


def delete(root: Root, path: str) -> bool:
    """Remove `path` (a link itself, never its target), in a directory inside `root`."""
    with contextlib.suppress(FileNotFoundError), _working_in(root, path) as (directory, name):
        os.unlink(name, dir_fd=directory)
    return True


def remove_tree(root: Root, path: str) -> int:
    """Remove the directory `path` and all below it (a link there: the link itself), in a
    directory inside `root`; how many files it held."""
    with _working_in(root, path) as (directory, name):
        count = sum(len(files) for _, _, files, _ in os.fwalk(name, dir_fd=directory))
        if _is_link(directory, name):
            os.unlink(name, dir_fd=directory)
        else:
            shutil.rmtree(name, dir_fd=directory)
    return count


def move(root: Root, old: str, new: str) -> None:
    """Rename `old` to `new` (its directory made first), both in directories inside `root`."""
    with _working_in(root, old) as (source, old_name), \
            _working_in(root, new, make=True) as (target, new_name):
        os.rename(old_name, new_name, src_dir_fd=source, dst_dir_fd=target)


def exchange(root: Root, first: str, second: str) -> bool:
    """Swap the entries at `first` and `second` in one step (renameat2's RENAME_EXCHANGE:
    neither name is missing at any moment); False where the filesystem cannot (NFS, some
    FUSE filesystems), which changes nothing."""
    renameat2 = getattr(_LIBC, "renameat2", None)  # (glibc 2.28 and later)
    if renameat2 is None:
        return False
    with _working_in(root, first) as (one, one_name), _working_in(root, second) as (other, other_name):
        if renameat2(one, os.fsencode(one_name), other, os.fsencode(other_name), RENAME_EXCHANGE) == 0:
            return True
        failure = ctypes.get_errno()
    if failure in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(failure, os.strerror(failure), second)


@contextlib.contextmanager
def _working_in(root: Root, path: str, *, make: bool = False) -> Iterator[tuple[int, str]]:
    """The directory of `path`, opened inside `root` (`make`: made first if there is none),
    and the entry's name in it. Entries are made, renamed and removed relative to the open
    directory: a link swapped in on the way once it is open changes nothing (resolved by
    path, the rename of a write's temporary file would have followed it outside). One
    openat2 where a resolution cost seven stats; a missing directory is made only when the
    open finds none (chunk directories mostly exist)."""
    parent, name = os.path.split(path)
    try:
        directory = root.directory(parent)
    except FileNotFoundError:
        if not make:
            raise
        directory = _made(root, parent)
    try:
        yield directory, name
    finally:
        os.close(directory)


def _made(root: Root, path: str) -> int:
    """The directory `path`, made with those missing above it, opened to work in. Each is
    made in its parent as opened, not by path, where a link swapped in meanwhile would have
    been followed (empty directories made outside)."""
    missing: list[str] = []
    made_root = False
    while True:
        try:
            directory = root.directory(path)
            break
        except FileNotFoundError:
            if path.rstrip("/") != root.path.rstrip("/"):
                path, name = os.path.split(path)
                missing.append(name)
            elif made_root:
                raise
            else:  # (a store made by its first put: the root the mount names, as named)
                os.makedirs(root.real, exist_ok=True)
                made_root = True
    try:
        for name in reversed(missing):
            with contextlib.suppress(FileExistsError):  # (another writer made it first)
                os.mkdir(name, dir_fd=directory)
            made = os.open(name, WORKING_FLAGS | os.O_NOFOLLOW, dir_fd=directory)  # (a link: ENOTDIR)
            os.close(directory)
            directory = made
    except BaseException:
        os.close(directory)
        raise
    return directory


def _is_link(directory: int, name: str) -> bool:
    return stat.S_ISLNK(os.stat(name, dir_fd=directory, follow_symlinks=False).st_mode)


def _exists(directory: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=directory, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


@contextlib.contextmanager
def _holding(root: Root, path: str, expect: str) -> Iterator[None]:
    """Exclusive among writers of `path` while it is generation `expect`."""
    while True:
        try:
            fd, status = root.open(path)
        except FileNotFoundError:
            raise ConflictError(os.path.basename(path)) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                current = os.stat(path)
            except FileNotFoundError:
                raise ConflictError(os.path.basename(path)) from None
            if current.st_ino != status.st_ino:
                continue  # replaced while we waited: lock the new file
            if generation_of(current) != expect:
                raise ConflictError(os.path.basename(path))
            yield
            return
        finally:
            os.close(fd)  # releases the lock


def _create(root: Root, path: str, data: Payload, sync_directory: bool) -> str:
    with _working_in(root, path, make=True) as (directory, name):
        temp, new = _write_temporary(directory, name, data)
        try:
            os.link(temp, name, src_dir_fd=directory, dst_dir_fd=directory)
        except FileExistsError:
            raise ConflictError(name) from None
        finally:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=directory)
        if sync_directory:
            fsync_directory(".", dir_fd=directory)
    return new


def _write_temporary(directory: int, name: str, data: Payload) -> tuple[str, str]:
    """A durable temporary file beside `name` in `directory` holding `data`: its name and
    generation. (O_EXCL: a link at the temporary name itself is never followed.)"""
    temp = f"{TEMP_PREFIX}{os.getpid()}-{random.getrandbits(48):012x}-{name}"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644, dir_fd=directory)
    try:
        try:
            for piece in pieces(data):
                view = memoryview(piece).cast("B")
                while view:
                    view = view[os.write(fd, view) :]
            now = time.time_ns()
            os.utime(fd, ns=(now, now))  # file systems stamp at clock-tick resolution
            os.fsync(fd)
            return temp, generation_of(os.fstat(fd))
        finally:
            os.close(fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=directory)
        raise


def fsync_directory(directory: str, dir_fd: int | None = None) -> bool:
    """fsync `directory` (relative to `dir_fd`: "." for a directory opened to work in, whose
    O_PATH descriptor cannot be synced itself)."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return True


def writable(path: str) -> bool:
    """Whether we may write at `path` or, if it does not exist yet, create it."""
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return os.access(path, os.W_OK)


def temporary_owner_alive(temp_name: str) -> bool:
    """Whether the process that is writing a temporary file of an atomic put still runs."""
    pid_text = temp_name[len(TEMP_PREFIX) :].split("-", 1)[0]
    if not (pid_text.isascii() and pid_text.isdigit()):
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_temporaries(root: str) -> int:
    """Delete the temporary files below `root` left by atomic writes of processes that have
    died; how many."""
    removed = 0
    for _, _, files, directory in os.fwalk(root):  # (each unlinked in its directory as opened)
        for name in files:
            if name.startswith(TEMP_PREFIX) and not temporary_owner_alive(name):
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=directory)
                    removed += 1
    return removed
