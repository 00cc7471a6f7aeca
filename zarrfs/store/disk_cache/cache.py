"""A persistent cache of stored objects and byte ranges on local disk (`-o disk_cache=DIR`),
shared by every daemon that names the same DIR.

An entry is one file, `DIR/objects/NAME`: a header with checksums (`disk_cache_entries`),
then the bytes as the store gave them. NAME is the SHA-256 of the store, the object's path,
the byte range and the generation the bytes were read at: a name always means the same
bytes, so two daemons writing one entry write the same file, and a changed object is a new
name (the old one ages out). A file is written under a temporary name and renamed; whatever
is read is checked against its header and checksums, and a mismatch (a torn or damaged
file) is a miss, never served.

The index, `DIR/index.sqlite` (WAL: safe across processes), holds a row per entry: its
object, generation, cost on disk and last use, and who is writing or removing it. Space is
claimed in the index before a file is written, and the least recently used entries are
deleted before their room is claimed, so the files (and the index's own files) never take
more than SIZE, however many daemons fill the directory at once. A row whose writer died
(kill -9) is cleaned up by the next daemon to open the directory.

Faults of the cache itself (a full disk, DIR removed or unwritable) never fail a read: they
are logged once and the read goes to the store.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

from ...errors import ZarrfsError
from ..values import Buffer
from . import entries

log = logging.getLogger(__name__)
T = TypeVar("T")

INDEX = "index.sqlite"
OBJECTS = "objects"
_BLOCK = 4096  # (what a file costs on disk: whole blocks)
# Room kept for the index's own growth between two looks at it (its WAL is checkpointed
# every 64 pages, 256 KiB).
_INDEX_MARGIN = 1 << 20
SMALLEST = 8 << 20  # a smaller SIZE leaves no room for entries beside the index
_TOUCH_BATCH, _TOUCH_SECONDS = 512, 2.0  # last uses are written to the index in batches
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


class DiskCacheError(ZarrfsError):
    """DIR cannot serve as a disk cache (the mount fails with this one line)."""


def entry_name(store: str, path: str, start: int, length: int, generation: str) -> str:
    """The file name of the bytes [start, start + length) of `path` (length -1: all of it) at
    `generation`, in the store `store`."""
    text = "\0".join((store, path, str(start), str(length), generation))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _owner_of_this_process() -> str:
    return f"{os.getpid()}.{_start_time(os.getpid())}"


def _start_time(pid: int) -> str:
    """When process `pid` started (clock ticks since boot): with the pid, one process ever."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return "gone"


def _alive(owner: str) -> bool:
    pid, _, started = owner.partition(".")
    return pid.isdigit() and _start_time(int(pid)) == started


class DiskCache:
    """The entries in DIR: looked up by name, added within the size bound, counted."""

    def __init__(self, directory: str, size: int) -> None:
        """Opens (or makes) the cache in `directory`; DiskCacheError in one line when it
        cannot be."""
        if size < SMALLEST:
            raise DiskCacheError(f"disk_cache_size={size} is too small: at least {SMALLEST >> 20}M")
        self.directory = os.path.abspath(directory)
        self.objects = os.path.join(self.directory, OBJECTS)
        self.size = size
        self.owner = _owner_of_this_process()
        self.hits = self.misses = 0
        self._lock = threading.Lock()  # (one connection, used by one thread at a time)
        self._counting = threading.Lock()  # (hits, misses and last uses: never behind the index)
        self._touched: dict[str, float] = {}
        self._touches_written = time.monotonic()
        self._faults: set[str] = set()  # (what went wrong: each said once in the log)
        try:
            self._db = self._open()
            self.remove_orphans()
        except (OSError, sqlite3.Error) as e:
            raise DiskCacheError(f"disk cache {self.directory}: {_reason(e)}") from None

    def _open(self) -> sqlite3.Connection:
        fresh = os.path.isdir(self.directory) and not os.path.exists(os.path.join(self.directory, INDEX))
        others = fresh and any(not n.startswith(INDEX) and n != OBJECTS for n in os.listdir(self.directory))
        if others:
            raise OSError("it holds other files (not a zarrfs disk cache): name an empty directory")
        os.makedirs(self.objects, mode=0o700, exist_ok=True)
        if not os.access(self.objects, os.W_OK | os.X_OK):
            raise PermissionError("not writable")
        db = sqlite3.connect(os.path.join(self.directory, INDEX), timeout=30.0,
                             isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")  # (a cache: a lost last transaction is a miss)
        db.execute("PRAGMA wal_autocheckpoint=64")
        db.execute("PRAGMA journal_size_limit=1048576")
        db.executescript(f"BEGIN IMMEDIATE; {_SCHEMA} COMMIT;")
        return db

    # -- reads -----------------------------------------------------------------------------

    def load(self, name: str, start: int = 0, length: int = -1) -> Buffer | None:
        """Bytes [start, start + length) of entry `name` (length -1: all), checked (None: not
        cached, or not whole and sound)."""
        found = self._read(name, lambda fd: entries.read(fd, name, start, length))
        if found is None:
            return None
        data = found[0]
        if data is None:
            self._unsound(name)
            return None
        self._touch(name)
        return data

    def length(self, name: str) -> int | None:
        """The length of entry `name`'s data as its header says (None: not cached); its
        checksums are checked as it is read."""
        found = self._read(name, lambda fd: entries.length(fd, name))
        return None if found is None else found[0]

    def _read(self, name: str, read: Callable[[int], T]) -> tuple[T] | None:
        """`read` of entry `name`'s open file (None: no such entry, or it could not be read)."""
        try:
            fd = os.open(os.path.join(self.objects, name), os.O_RDONLY)
        except FileNotFoundError:
            return None
        except OSError as e:
            self.fault("cannot read an entry", e)
            return None
        try:
            return (read(fd),)
        except OSError as e:
            self.fault("cannot read an entry", e)
            return None
        finally:
            os.close(fd)

    def _unsound(self, name: str) -> None:
        self.fault("an entry failed its checksum (served from the store)", None)
        with contextlib.suppress(OSError, sqlite3.Error):
            self._remove([name])

    def generations(self, store: str, path: str | None, limit: int = -1) -> list[str]:
        """The generations the cache holds entries of, of `path` (None: of any path of
        `store`), the last used first; at most `limit` of them (-1: all)."""
        which = ("", (store,)) if path is None else (" AND path = ?", (store, path))
        try:
            with self._lock:
                rows = self._db.execute(
                    f"SELECT generation FROM entries WHERE store = ?{which[0]} "
                    "GROUP BY generation ORDER BY MAX(used) DESC LIMIT ?", (*which[1], limit)).fetchall()
        except sqlite3.Error as e:
            self.fault("cannot read the index", e)
            return []
        return [row[0] for row in rows]

    def entries_below(self, store: str, prefix: str, limit: int) -> list[tuple[str, str]]:
        """The paths and generations of entries whose path starts with `prefix` (at most
        `limit` of them, the first in order)."""
        try:
            with self._lock:
                rows = self._db.execute(
                    "SELECT DISTINCT path, generation FROM entries "
                    "WHERE store = ? AND path >= ? AND path < ? ORDER BY path LIMIT ?",
                    (store, prefix, prefix + "\U0010ffff", limit)).fetchall()
        except sqlite3.Error as e:
            self.fault("cannot read the index", e)
            return []
        return [(row[0], row[1]) for row in rows]

    # -- writes ----------------------------------------------------------------------------

    def save(self, name: str, store: str, path: str, generation: str, data: bytes | memoryview) -> None:
        """Keep `data` as entry `name`, room made first; nothing when it cannot be."""
        cost = _cost(len(data))
        try:
            if cost > self._budget() // 4 or not self._claim(name, store, path, generation, cost):
                return
        except (OSError, sqlite3.Error) as e:
            self.fault("cannot make room", e)
            return
        final = os.path.join(self.objects, name)
        temporary = final + ".part"
        try:
            whole = bytes(data)  # (the checksum is taken of bytes)
            with open(temporary, "wb") as f:
                f.write(entries.header(name, whole))
                f.write(whole)
            os.rename(temporary, final)
            with self._lock, _transaction(self._db):
                self._db.execute("UPDATE entries SET owner = NULL WHERE name = ?", (name,))
        except (OSError, sqlite3.Error) as e:
            self.fault("cannot write an entry", e)
            with contextlib.suppress(OSError, sqlite3.Error):
                _unlink(temporary)
                self._remove([name])

    def _claim(self, name: str, store: str, path: str, generation: str, cost: int) -> bool:
        """Claim `cost` bytes for a new entry, after deleting least recently used entries
        until it fits. False: the entry is there already, or no room can be made."""
        budget = self._budget()
        while True:
            with self._lock, _transaction(self._db):
                db = self._db
                if db.execute("SELECT 1 FROM entries WHERE name = ?", (name,)).fetchone():
                    return False
                total = db.execute("SELECT cost FROM total").fetchone()[0]
                if total + cost <= budget:
                    db.execute("INSERT INTO entries VALUES (?, ?, ?, ?, ?, ?, ?)",
                               (name, store, path, generation, cost, time.time(), self.owner))
                    return True
                victims = _least_recently_used(db, total + cost - budget)
                if not victims:
                    return False
                db.executemany("UPDATE entries SET owner = ? WHERE name = ?",
                               [(self.owner, victim) for victim in victims])
            self._delete_files(victims)  # (their room is free only once their files are gone)

    def _delete_files(self, names: Sequence[str]) -> None:
        for name in names:
            _unlink(os.path.join(self.objects, name))
        with self._lock, _transaction(self._db):
            self._db.executemany("DELETE FROM entries WHERE name = ?", [(n,) for n in names])

    def _remove(self, names: Sequence[str]) -> None:
        with self._lock, _transaction(self._db):
            self._db.executemany("UPDATE entries SET owner = ? WHERE name = ?",
                                 [(self.owner, n) for n in names])
        self._delete_files(names)

    def drop(self, store: str, path: str, keep: str | None = None) -> None:
        """Delete the entries of `path` (but those of generation `keep`): it changed."""
        try:
            with self._lock:
                rows = self._db.execute(
                    "SELECT name FROM entries WHERE store = ? AND path = ? AND generation IS NOT ? "
                    "AND owner IS NULL", (store, path, keep)).fetchall()
            if rows:
                self._remove([row[0] for row in rows])
        except (OSError, sqlite3.Error) as e:
            self.fault("cannot delete an entry", e)

    def remove_orphans(self) -> int:
        """Delete what writers that died left: claimed rows, and their files and temporaries."""
        with self._lock:
            owners = [row[0] for row in
                      self._db.execute("SELECT DISTINCT owner FROM entries WHERE owner IS NOT NULL")]
        dead = [owner for owner in owners if not _alive(owner)]
        removed = 0
        for owner in dead:
            with self._lock:
                rows = self._db.execute("SELECT name FROM entries WHERE owner = ?", (owner,)).fetchall()
            names = [row[0] for row in rows]
            for name in names:
                _unlink(os.path.join(self.objects, name) + ".part")
            self._delete_files(names)
            removed += len(names)
        return removed

    # -- room and last uses --------------------------------------------------------------------

    def _budget(self) -> int:
        """What entries may take: SIZE, less what the index and the directories take."""
        overhead = _INDEX_MARGIN
        for name in (INDEX, INDEX + "-wal", INDEX + "-shm", OBJECTS, "."):
            with contextlib.suppress(FileNotFoundError):
                overhead += os.stat(os.path.join(self.directory, name)).st_blocks * 512
        return self.size - overhead

    def missed(self) -> None:
        with self._counting:
            self.misses += 1

    def _touch(self, name: str) -> None:
        with self._counting:
            self.hits += 1
            self._touched[name] = time.time()
            waited = time.monotonic() - self._touches_written
            due = len(self._touched) >= _TOUCH_BATCH or waited > _TOUCH_SECONDS
        if due:
            self.write_touches()

    def write_touches(self) -> None:
        """Write the last uses noted since the last time (least recently used goes first)."""
        with self._counting:
            touched, self._touched = self._touched, {}
            self._touches_written = time.monotonic()
        if not touched:
            return
        with self._lock:
            try:
                with _transaction(self._db):
                    self._db.executemany("UPDATE entries SET used = ? WHERE name = ?",
                                         [(used, name) for name, used in touched.items()])
            except sqlite3.Error as e:
                self.fault("cannot write to the index", e)

    def cached_bytes(self) -> int:
        try:
            with self._lock:
                return int(self._db.execute("SELECT cost FROM total").fetchone()[0])
        except sqlite3.Error:
            return 0

    def fault(self, what: str, error: BaseException | None) -> None:
        """A fault of the cache: said once in the log; the read goes on from the store."""
        if what not in self._faults:
            self._faults.add(what)
            reason = "" if error is None else f": {_reason(error)}"
            log.warning("disk cache %s: %s%s; reads go to the store", self.directory, what, reason)

    def close(self) -> None:
        self.write_touches()
        with self._lock, contextlib.suppress(sqlite3.Error):
            self._db.close()


def _least_recently_used(db: sqlite3.Connection, needed: int) -> list[str]:
    victims, freed = [], 0
    for name, cost in db.execute("SELECT name, cost FROM entries WHERE owner IS NULL ORDER BY used"):
        victims.append(name)
        freed += cost
        if freed >= needed:
            return victims
    return []  # (not enough room even with every ready entry gone: the rest are being written)


@contextlib.contextmanager
def _transaction(db: sqlite3.Connection) -> Iterator[None]:
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def _cost(length: int) -> int:
    blocks = -(-(entries.overhead(length) + length) // _BLOCK)
    return (blocks + (1 if blocks > 256 else 0)) * _BLOCK  # (a large file: an extent block too)


def _unlink(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def _reason(error: BaseException) -> str:
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return str(error).splitlines()[0] if str(error) else type(error).__name__
