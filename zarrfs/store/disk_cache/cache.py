"""A persistent cache of stored objects and byte ranges on local disk (`-o disk_cache=DIR`),
shared by every daemon that names the same DIR.

An entry is one file, `DIR/objects/NAME`: a header with checksums (`disk_cache_entries`),
then the bytes as the store gave them. NAME is the SHA-256 of the store, the object's path,
the byte range and the generation the bytes were read at: a name always means the same
bytes, so two daemons writing one entry write the same file, and a changed object is a new
name (the old one ages out). A file is written under a temporary name and renamed; whatever
is read is checked against its header and checksums, and a mismatch (a torn or damaged
file) is a miss, never served: the entry is dropped and fetched again.

The index, `DIR/index.sqlite` (`index`; WAL: safe across processes), holds a row per entry:
its object, generation, cost on disk and last use, and who is writing or removing it. Space
is claimed in the index before a file is written, and the least recently used entries are
deleted before their room is claimed, so the files (and the index's own files) never take
more than SIZE, however many daemons fill the directory at once. A row whose writer died
(kill -9) is cleaned up by the next daemon to open the directory; files and rows that do not
match (the index lost its last changes: a crash of the machine, a damaged WAL) are too. A
damaged index is replaced by a fresh one (`index`).

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
from collections.abc import Callable, Sequence
from typing import TypeVar

from ...errors import ZarrfsError
from ..values import Buffer, Opened
from . import entries
from .index import OBJECTS, DamagedIndex, Index, names, prepare, reason_of, remove_file, rows

log = logging.getLogger(__name__)
T = TypeVar("T")

_BLOCK = 4096  # (what a file costs on disk: whole blocks)
# Room kept for the index's own growth between two looks at it (its WAL is checkpointed
# every 64 pages, 256 KiB).
_INDEX_MARGIN = 1 << 20
SMALLEST = 8 << 20  # a smaller SIZE leaves no room for entries beside the index
_TOUCH_BATCH, _TOUCH_SECONDS = 512, 2.0  # last uses are written to the index in batches
_PART = ".part"  # (an entry's file being written)
_OWNER = (str, type(None))  # (a row's owner: a process, or none once its file is ready)


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
        """Opens (or makes) the cache in `directory`, healed of what damage it finds;
        DiskCacheError in one line when it cannot be one."""
        if size < SMALLEST:
            raise DiskCacheError(f"disk_cache_size={size} is too small: at least {SMALLEST >> 20}M")
        self.directory = os.path.abspath(directory)
        self.objects = os.path.join(self.directory, OBJECTS)
        self.size = size
        self.owner = _owner_of_this_process()
        self.hits = self.misses = 0
        self._counting = threading.Lock()  # (hits, misses and last uses: never behind the index)
        self._touched: dict[str, float] = {}
        self._touches_written = time.monotonic()
        self._faults: set[str] = set()  # (what went wrong: each said once in the log)
        try:
            prepare(self.directory)
            self._index = Index(self.directory, self.owner)
            self.remove_orphans()
            self._reconcile()
        except (OSError, sqlite3.Error) as e:
            raise DiskCacheError(f"disk cache {self.directory}: {reason_of(e)}") from None

    # -- reads -----------------------------------------------------------------------------

    def load(self, name: str, start: int = 0, length: int = -1) -> Buffer | None:
        """Bytes [start, start + length) of entry `name` (length -1: all), checked (None: not
        cached, or not whole and sound: then dropped)."""
        found = self._read(name, lambda fd: entries.read(fd, name, start, length))
        if found is None:
            return None
        data = found[0]
        if data is None:
            self._unsound(name)
            return None
        self._touch(name)
        return data

    def open(self, name: str, generation: str) -> Opened | None:
        """Entry `name` (of an object at `generation`) opened for a reader elsewhere, which
        checks its data against the CRC-32C its header gives (`read_opened`); None: not
        cached, or its header is not sound (then dropped). Its bytes stay the entry's: a file
        is never written in place, and one evicted is unlinked under the descriptor."""
        found = self._read(name, lambda fd: (fd, entries.data_of(fd, name)), keep=lambda f: f[1] is not None)
        if found is None:
            return None
        fd, where = found[0]
        if where is None:
            self._unsound(name)
            return None
        self._touch(name)
        return Opened(fd, where[1], generation, where[0], where[2])

    def length(self, name: str) -> int | None:
        """The length of entry `name`'s data as its header says (None: not cached, or its
        header is not sound: then dropped); its checksums are checked as it is read."""
        found = self._read(name, lambda fd: entries.length(fd, name))
        if found is not None and found[0] is None:
            self._unsound(name)
        return None if found is None else found[0]

    def _read(self, name: str, read: Callable[[int], T],
              keep: Callable[[T], bool] | None = None) -> tuple[T] | None:
        """`read` of entry `name`'s open file (None: no such entry, or it could not be read),
        closed after unless `keep` says so of what `read` gave."""
        try:
            fd = os.open(os.path.join(self.objects, name), os.O_RDONLY)
        except FileNotFoundError:
            return None
        except OSError as e:
            self.fault("cannot read an entry", e)
            return None
        kept = False
        try:
            found = read(fd)
            kept = keep is not None and keep(found)
            return (found,)
        except OSError as e:
            self.fault("cannot read an entry", e)
            return None
        finally:
            if not kept:
                os.close(fd)

    def _unsound(self, name: str) -> None:
        self.fault("an entry failed its checksum (served from the store)", None)
        with contextlib.suppress(OSError, sqlite3.Error):
            self._remove([name])

    def generations(self, store: str, path: str | None, limit: int = -1) -> list[str]:
        """The generations the cache holds entries of, of `path` (None: of any path of
        `store`), the last used first; at most `limit` of them (-1: all)."""
        which = ("", (store,)) if path is None else (" AND path = ?", (store, path))
        sql = (f"SELECT generation FROM entries WHERE store = ?{which[0]} "
               "GROUP BY generation ORDER BY MAX(used) DESC LIMIT ?")
        try:
            found = self._index.run(lambda db: rows(db, sql, (*which[1], limit), str))
        except sqlite3.Error as e:
            self.fault("cannot read the index", e)
            return []
        return [row[0] for row in found]

    def entries_below(self, store: str, prefix: str, limit: int) -> list[tuple[str, str]]:
        """The paths and generations of entries whose path starts with `prefix` (at most
        `limit` of them, the first in order)."""
        sql = ("SELECT DISTINCT path, generation FROM entries "
               "WHERE store = ? AND path >= ? AND path < ? ORDER BY path LIMIT ?")
        try:
            found = self._index.run(lambda db: rows(db, sql, (store, prefix, prefix + "\U0010ffff", limit),
                                                    str, str))
        except sqlite3.Error as e:
            self.fault("cannot read the index", e)
            return []
        return [(row[0], row[1]) for row in found]

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
        temporary = final + _PART
        try:
            whole = bytes(data)  # (the checksum is taken of bytes)
            with open(temporary, "wb") as f:
                f.write(entries.header(name, whole))
                f.write(whole)
            os.rename(temporary, final)
            ready = self._index.run(lambda db: db.execute(
                "UPDATE entries SET owner = NULL WHERE name = ? AND owner = ?", (name, self.owner)).rowcount,
                write=True)
            if not ready:  # (the index was started afresh meanwhile: the file is not in it)
                remove_file(final)
        except (OSError, sqlite3.Error) as e:
            self.fault("cannot write an entry", e)
            with contextlib.suppress(OSError, sqlite3.Error):
                remove_file(temporary)
                self._remove([name])

    def _claim(self, name: str, store: str, path: str, generation: str, cost: int) -> bool:
        """Claim `cost` bytes for a new entry, after deleting least recently used entries
        until it fits. False: the entry is there already, or no room can be made."""
        budget = self._budget()

        def claim(db: sqlite3.Connection) -> bool | list[str]:
            """True: claimed; False: not to be written; else the entries to delete first."""
            found = rows(db, "SELECT owner FROM entries WHERE name = ?", (name,), _OWNER)
            if found and (found[0][0] is not None or os.path.exists(os.path.join(self.objects, name))):
                return False
            if found:  # (a ready row whose file is gone: it is written again)
                db.execute("DELETE FROM entries WHERE name = ?", (name,))
            total = rows(db, "SELECT cost FROM total", (), int)
            if len(total) != 1:
                raise DamagedIndex("its total is gone")
            if total[0][0] + cost <= budget:
                db.execute("INSERT INTO entries VALUES (?, ?, ?, ?, ?, ?, ?)",
                           (name, store, path, generation, cost, time.time(), self.owner))
                return True
            victims = _least_recently_used(db, total[0][0] + cost - budget)
            db.executemany("UPDATE entries SET owner = ? WHERE name = ?",
                           [(self.owner, victim) for victim in victims])
            return victims or False

        while True:
            outcome = self._index.run(claim, write=True)
            if isinstance(outcome, bool):
                return outcome
            self._delete_files(outcome)  # (their room is free only once their files are gone)

    def _delete_files(self, names: Sequence[str]) -> None:
        for name in names:
            remove_file(os.path.join(self.objects, name))
        gone = [(name,) for name in names]
        self._index.run(lambda db: db.executemany("DELETE FROM entries WHERE name = ?", gone), write=True)

    def _remove(self, names: Sequence[str]) -> None:
        self._index.run(lambda db: db.executemany("UPDATE entries SET owner = ? WHERE name = ?",
                                                  [(self.owner, n) for n in names]), write=True)
        self._delete_files(names)

    def drop(self, store: str, path: str, keep: str | None = None) -> None:
        """Delete the entries of `path` (but those of generation `keep`): it changed."""
        sql = ("SELECT name FROM entries WHERE store = ? AND path = ? AND generation IS NOT ? "
               "AND owner IS NULL")
        try:
            found = self._index.run(lambda db: rows(db, sql, (store, path, keep), str))
            if found:
                self._remove([row[0] for row in found])
        except (OSError, sqlite3.Error) as e:
            self.fault("cannot delete an entry", e)

    def remove_orphans(self) -> int:
        """Delete what writers that died left: claimed rows, and their files and temporaries."""
        def owned_by(owner: str | None) -> list[str]:
            """The owners of claimed rows (None), or the names of the rows `owner` claimed."""
            sql, args = (("SELECT DISTINCT owner FROM entries WHERE owner IS NOT NULL", ()) if owner is None
                         else ("SELECT name FROM entries WHERE owner = ?", (owner,)))
            return [row[0] for row in self._index.run(lambda db: rows(db, sql, args, str))]

        removed = 0
        for owner in owned_by(None):
            if _alive(owner):
                continue
            names = owned_by(owner)
            for name in names:
                remove_file(os.path.join(self.objects, name) + _PART)
            self._delete_files(names)
            removed += len(names)
        return removed

    def _reconcile(self) -> None:
        """Make the files and the rows agree again, where the index lost its last changes (a
        crash of the machine, a damaged WAL): a file without a row is deleted, a row whose
        file is gone dropped, the total counted again. Said in the log when anything was."""
        epoch = self._index.epoch
        listed = set(os.listdir(self.objects))  # (first: a file is there only once its row is)
        ready, claimed = self._index.run(lambda db: (names(db, "owner IS NULL"),
                                                     names(db, "owner IS NOT NULL")))
        if self._index.epoch != epoch:
            return  # (started afresh meanwhile: nothing left to reconcile)
        strays = [name for name in listed - ready - claimed  # (and a .part of neither)
                  if name.removesuffix(_PART) not in ready and name.removesuffix(_PART) not in claimed]
        for name in strays:
            remove_file(os.path.join(self.objects, name))
        gone = [(name,) for name in ready - listed
                if not os.path.exists(os.path.join(self.objects, name))]  # (nor made since the listing)

        def count(db: sqlite3.Connection) -> None:
            db.executemany("DELETE FROM entries WHERE name = ? AND owner IS NULL", gone)
            db.execute("UPDATE total SET cost = (SELECT COALESCE(SUM(cost), 0) FROM entries)")

        self._index.run(count, write=True)
        if strays or gone:
            log.warning("disk cache %s: its index had lost changes (a crash of the machine, or damage): "
                        "%d files it did not hold deleted, %d of its entries without a file dropped",
                        self.directory, len(strays), len(gone))

    # -- room and last uses --------------------------------------------------------------------

    def _budget(self) -> int:
        """What entries may take: SIZE, less what the index and the directories take."""
        overhead = _INDEX_MARGIN
        for name in (*self._index.files, OBJECTS, "."):
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
        try:
            self._index.run(lambda db: db.executemany("UPDATE entries SET used = ? WHERE name = ?",
                                                      [(used, name) for name, used in touched.items()]),
                            write=True)
        except sqlite3.Error as e:
            self.fault("cannot write to the index", e)

    def cached_bytes(self) -> int:
        try:
            found = self._index.run(lambda db: rows(db, "SELECT cost FROM total", (), int))
        except sqlite3.Error:
            return 0
        return found[0][0] if found else 0

    def fault(self, what: str, error: BaseException | None) -> None:
        """A fault of the cache: said once in the log; the read goes on from the store."""
        if what not in self._faults:
            self._faults.add(what)
            reason = "" if error is None else f": {reason_of(error)}"
            log.warning("disk cache %s: %s%s; reads go to the store", self.directory, what, reason)

    def close(self) -> None:
        self.write_touches()
        self._index.close()


def _least_recently_used(db: sqlite3.Connection, needed: int) -> list[str]:
    victims, freed = [], 0
    ready = rows(db, "SELECT name, cost FROM entries WHERE owner IS NULL ORDER BY used", (), str, int)
    for name, cost in ready:
        victims.append(name)
        freed += cost
        if freed >= needed:
            return victims
    return []  # (not enough room even with every ready entry gone: the rest are being written)


def _cost(length: int) -> int:
    blocks = -(-(entries.overhead(length) + length) // _BLOCK)
    return (blocks + (1 if blocks > 256 else 0)) * _BLOCK  # (a large file: an extent block too)
