"""The index of a disk cache, `DIR/index.sqlite` (`cache`): one connection to it that follows
the file when another daemon replaces it, and that replaces it when it is damaged.

Damaged: SQLite finds it malformed or not a database, its check as it opens fails, a row
holds what no row of ours can, or it was lost while entries remain. Without it what the
entries hold is unknown, so the directory starts afresh: the entries are moved aside (and
deleted in the background) and a fresh, empty index takes its place; they are fetched again.

Several daemons may use DIR at once, each with its connection open. So the fresh index is
made whole under another name and renamed over the old one, under an exclusive lock of
`index.sqlite.lock`, which every daemon holds shared while it connects or closes; SQLite's
files of the old one (-wal, -shm, -journal) are removed first, so the new one never meets them. A daemon
left on the old file keeps its open files, sees before its next use of the index that the
name holds another file, and connects to it (SQLite never deletes by name the files of a
database that was moved: nothing of the new one is touched as the old one closes).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")
File = tuple[int, int]  # (a file's device and inode: which file a name holds)

INDEX = "index.sqlite"
OBJECTS = "objects"
LOCK = INDEX + ".lock"
_FRESH = INDEX + ".fresh-"  # (a fresh index being made, renamed over INDEX once whole)
_TRASH = OBJECTS + ".trash-"  # (the entries of a damaged index, being deleted)
_SQLITE_FILES = ("-wal", "-shm", "-journal")
_CORRUPT, _NOTADB = 11, 26  # (SQLite's primary result codes for a damaged file)
_SHORT_READ = 10 | 2 << 8  # (SQLITE_IOERR_SHORT_READ: the file is shorter than its pages)
_HEAL_EVERY = 10.0  # seconds: a daemon starts afresh at most this often (a disk that damages
# each new index would otherwise have its entries deleted in a loop)
_RETRY_SECONDS = 1.0  # (between tries to connect to a new index, after one failed)
_SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    name TEXT PRIMARY KEY, store TEXT NOT NULL, path TEXT NOT NULL, generation TEXT NOT NULL,
    cost INTEGER NOT NULL, used REAL NOT NULL,
    owner TEXT  -- the process writing (or deleting) its file; NULL: ready
);
CREATE INDEX IF NOT EXISTS entries_by_path ON entries (store, path);
CREATE INDEX IF NOT EXISTS entries_by_use ON entries (used);
CREATE TABLE IF NOT EXISTS total (one INTEGER PRIMARY KEY CHECK (one = 1), cost INTEGER NOT NULL);
INSERT OR IGNORE INTO total VALUES (1, 0);
CREATE TRIGGER IF NOT EXISTS entry_added AFTER INSERT ON entries
    BEGIN UPDATE total SET cost = cost + new.cost; END;
CREATE TRIGGER IF NOT EXISTS entry_removed AFTER DELETE ON entries
    BEGIN UPDATE total SET cost = cost - old.cost; END;
"""


class DamagedIndex(sqlite3.DatabaseError):
    """The index holds what it cannot hold (its file is damaged)."""


def damaged(error: BaseException) -> bool:
    """Whether `error` says the index is damaged (not busy, not out of room, not gone)."""
    if isinstance(error, DamagedIndex):
        return True
    code = getattr(error, "sqlite_errorcode", 0) if isinstance(error, sqlite3.DatabaseError) else 0
    return (code & 0xFF) in (_CORRUPT, _NOTADB) or code == _SHORT_READ


def rows(db: sqlite3.Connection, sql: str, args: tuple[object, ...],
         *types: type | tuple[type, ...]) -> list[tuple[Any, ...]]:
    """The rows `sql` selects, each value of its column's type (else DamagedIndex: a damaged
    page can hold any value, and it must not reach the code as a name or a size)."""
    found = db.execute(sql, args).fetchall()
    for row in found:
        if len(row) != len(types) or not all(isinstance(v, t) for v, t in zip(row, types, strict=True)):
            raise DamagedIndex("a row holds a value of another type than its column's")
    return found


def names(db: sqlite3.Connection, where: str) -> set[str]:
    """The names of the entries `where` selects (DamagedIndex: one that is not text). For
    every entry at once: checked by SQLite, not row by row."""
    if db.execute(f"SELECT 1 FROM entries WHERE ({where}) AND typeof(name) != 'text' LIMIT 1").fetchone():
        raise DamagedIndex("a name that is not text")
    return {row[0] for row in db.execute(f"SELECT name FROM entries WHERE {where}")}


class Index:
    """DIR's index: `run` a piece of work on it, on the file DIR holds now, healed if damaged."""

    def __init__(self, directory: str, owner: str) -> None:
        """Connects (DIR prepared: `prepare`); the errors of a DIR that cannot be one
        (OSError, sqlite3.Error) are raised, damage is healed."""
        self.directory = directory
        self.path = os.path.join(directory, INDEX)
        self.objects = os.path.join(directory, OBJECTS)
        self.owner = owner
        self._lock = threading.Lock()  # (one connection, used by one thread at a time)
        self._healed_at = -_HEAL_EVERY
        self._retry_at = 0.0
        self._db, self._file = self._connect()
        self.epoch = 0  # (counts the connections made since: a new one, a new index)
        self.files = (INDEX, *(INDEX + suffix for suffix in _SQLITE_FILES[:2]))  # (what it takes on disk)

    def run(self, work: Callable[[sqlite3.Connection], T], *, write: bool = False) -> T:
        """`work` on the index (in a transaction that writes: `write`); once more on a fresh
        index when it finds the index damaged. sqlite3.Error: the index cannot serve now."""
        with self._lock:
            self._follow()
            try:
                return _attempt(self._db, work, write)
            except sqlite3.DatabaseError as e:
                if not damaged(e):
                    raise
                try:
                    self._reconnect(*self._heal(e, self._file))
                except OSError as failed:
                    raise sqlite3.OperationalError(reason_of(failed)) from failed
            return _attempt(self._db, work, write)

    def close(self) -> None:
        with self._lock:
            _close(self._db, self.directory)

    # -- connecting --------------------------------------------------------------------------

    def _connect(self) -> tuple[sqlite3.Connection, File]:
        """A checked connection to the index DIR holds (started afresh first when damaged)."""
        with _locked(self.directory, fcntl.LOCK_SH):
            try:
                return _checked(self.path, self.objects)
            except sqlite3.DatabaseError as e:
                if not damaged(e):
                    raise
                error, seen = e, _identity(self.path)
        return self._heal(error, seen)

    def _heal(self, error: BaseException, seen: File | None) -> tuple[sqlite3.Connection, File]:
        """Start DIR afresh, unless another daemon did since the damaged file `seen` was
        found; a checked connection to the fresh index. Said once in the log."""
        if time.monotonic() - self._healed_at < _HEAL_EVERY:
            raise error
        self._healed_at = time.monotonic()
        with _locked(self.directory, fcntl.LOCK_EX):
            if _identity(self.path) == seen:
                self._start_afresh()
            log.warning("disk cache %s: its index is damaged (%s): started afresh (entries are "
                        "fetched again)", self.directory, reason_of(error))
            return _checked(self.path, self.objects)

    def _start_afresh(self) -> None:
        """A fresh index in place of DIR's (under the exclusive lock); the entries moved aside."""
        for name in os.listdir(self.directory):  # (what a daemon that died here left)
            if name.startswith(_FRESH):
                remove_file(os.path.join(self.directory, name))
        fresh = os.path.join(self.directory, _FRESH + self.owner)
        db = sqlite3.connect(fresh, isolation_level=None)
        try:
            _configure(db)
        finally:
            db.close()  # (its -wal is checkpointed and deleted: the file is whole)
        _set_aside(self.objects)
        os.mkdir(self.objects, 0o700)
        for suffix in _SQLITE_FILES:
            remove_file(self.path + suffix)
        os.rename(fresh, self.path)

    def _follow(self) -> None:
        """Connect to the index DIR holds now, if it is no longer the file this one has open
        (another daemon started afresh, or it was deleted). While DIR itself is gone, or
        between tries that failed, the open one serves on, as before."""
        now = _identity(self.path)
        if now == self._file or (now is None and not os.path.isdir(self.directory)):
            return
        if time.monotonic() < self._retry_at:
            return
        try:
            if now is None:
                prepare(self.directory)
            self._reconnect(*self._connect())
        except OSError as e:
            self._retry_at = time.monotonic() + _RETRY_SECONDS
            raise sqlite3.OperationalError(reason_of(e)) from e
        except sqlite3.Error:
            self._retry_at = time.monotonic() + _RETRY_SECONDS
            raise

    def _reconnect(self, db: sqlite3.Connection, file: File) -> None:
        old, self._db, self._file = self._db, db, file
        self.epoch += 1
        _close(old, self.directory)


def prepare(directory: str) -> None:
    """Make DIR a disk cache's directory (OSError: it cannot be one), and delete in the
    background what an earlier start afresh left to delete."""
    fresh = os.path.isdir(directory) and not os.path.exists(os.path.join(directory, INDEX))
    if fresh and any(not n.startswith((INDEX, OBJECTS)) for n in os.listdir(directory)):
        raise OSError("it holds other files (not a zarrfs disk cache): name an empty directory")
    os.makedirs(directory, mode=0o700, exist_ok=True)
    objects = os.path.join(directory, OBJECTS)
    if os.path.lexists(objects) and not os.path.isdir(objects):
        _set_aside(objects)  # (damaged: a file where the entries' directory belongs)
    os.makedirs(objects, mode=0o700, exist_ok=True)
    if not os.access(objects, os.W_OK | os.X_OK):
        raise PermissionError("not writable")
    for name in os.listdir(directory):
        if name.startswith(_TRASH):
            _delete_in_background(os.path.join(directory, name))


def _checked(path: str, objects: str) -> tuple[sqlite3.Connection, File]:
    """A connection to the index at `path`, checked; DamagedIndex (or SQLite's error for a
    damaged file) when it is not sound, or was lost while `objects` holds entries."""
    db = sqlite3.connect(path, timeout=30.0, isolation_level=None, check_same_thread=False)
    try:
        file = _identity(path)
        known = db.execute("SELECT count(*) FROM sqlite_master WHERE name = 'entries'").fetchone()[0]
        if not known and _holds_files(objects):
            raise DamagedIndex("gone, while entries remain")
        problems = [row[0] for row in db.execute("PRAGMA quick_check")]
        if problems != ["ok"]:
            raise DamagedIndex(problems[0].splitlines()[-1])
        _configure(db)
        if file is None:
            raise FileNotFoundError(path)
        return db, file
    except BaseException:
        db.close()
        raise


def _configure(db: sqlite3.Connection) -> None:
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")  # (a cache: a lost last transaction is a miss)
    db.execute("PRAGMA wal_autocheckpoint=64")
    db.execute("PRAGMA journal_size_limit=1048576")
    db.executescript(f"BEGIN IMMEDIATE; {_SCHEMA} COMMIT;")


def _close(db: sqlite3.Connection, directory: str) -> None:
    """Close `db` under DIR's shared lock: the last connection to an index deletes its -wal
    by name as it closes (unless the index was moved), never while the files are replaced."""
    try:
        with _locked(directory, fcntl.LOCK_SH), contextlib.suppress(sqlite3.Error):
            db.close()
    except OSError:  # (DIR gone: nothing of it to delete)
        with contextlib.suppress(sqlite3.Error):
            db.close()


def _attempt(db: sqlite3.Connection, work: Callable[[sqlite3.Connection], T], write: bool) -> T:
    if not write:
        return work(db)
    db.execute("BEGIN IMMEDIATE")
    try:
        result = work(db)
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
    return result


@contextlib.contextmanager
def _locked(directory: str, how: int) -> Iterator[None]:
    """DIR's lock: shared by a daemon connecting or closing, exclusive to one starting afresh."""
    fd = os.open(os.path.join(directory, LOCK), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, how)
        yield
    finally:
        os.close(fd)  # (and the lock with it)


def _holds_files(directory: str) -> bool:
    try:
        with os.scandir(directory) as found:
            return next(found, None) is not None
    except FileNotFoundError:
        return False


def _identity(path: str) -> File | None:
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return None
    return found.st_dev, found.st_ino


def _set_aside(objects: str) -> None:
    """Move the entries out of the way (in one rename), then delete them in the background."""
    if not os.path.lexists(objects):
        return
    trash = os.path.join(os.path.dirname(objects), f"{_TRASH}{os.getpid()}-{time.monotonic_ns()}")
    os.rename(objects, trash)
    _delete_in_background(trash)


def _delete_in_background(path: str) -> None:
    def delete() -> None:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)  # (another daemon may be deleting it too)
        else:
            remove_file(path)

    threading.Thread(target=delete, name="disk-cache-trash", daemon=True).start()


def remove_file(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def reason_of(error: BaseException) -> str:
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return str(error).splitlines()[0] if str(error) else type(error).__name__
