"""A damaged disk cache never costs the mount, through real mounts of a moto S3 server: every
file of the directory, its index and SQLite's files beside it included, damaged in turn
(bytes flipped, cut to nothing or to half, replaced by garbage); the mount starts, what it
reads is what the store holds, and the log says what was healed in one line. Damage made
under a running daemon (an entry, the index) is read past too, also with a second daemon
sharing the directory, and leaves a directory whose files and index agree."""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import fsspec
import numpy as np
import pytest

from tests.helpers.mounting import Mount, mounted
from tests.helpers.s3_server import S3Server, free_port, serving
from tests.helpers.scale_arrays import values, write_twin

GRID, CHUNK = (8, 8), (64, 64)
SHAPE = (GRID[0] * CHUNK[0], GRID[1] * CHUNK[1])
EXPECTED = values((0, 0), SHAPE).tobytes()
ENTRIES = GRID[0] * GRID[1] + 1  # (and zarr.json)
INDEX = "index.sqlite"


def flipped(data: bytes) -> bytes:
    """Every 997th byte flipped, from the sixth (in the index, its header's magic)."""
    damaged = bytearray(data)
    for at in range(5, len(damaged), 997):
        damaged[at] ^= 0xFF
    return bytes(damaged)


def length_flipped(data: bytes) -> bytes:
    """The highest bit of byte 19 flipped: in an entry, of the data's length in its header."""
    damaged = bytearray(data)
    if len(damaged) > 19:
        damaged[19] ^= 0x80
    return bytes(damaged)


DAMAGES: dict[str, Callable[[bytes], bytes]] = {
    "flipped": flipped,
    "length flipped": length_flipped,
    "cut to nothing": lambda data: b"",
    "cut to half": lambda data: data[: len(data) // 2],
    "garbage": lambda data: np.random.default_rng(len(data)).bytes(max(len(data), 4096)),
}
# What the log says of each file's damage: the index and the entries are checked, so their
# damage is always found, and healed in one line. SQLite mends its own files, checked by it,
# and the line says what that cost, if anything: a WAL's damaged frames are dropped (the
# changes not yet in the index are lost), a -shm is rebuilt, a journal that is not a whole
# one is ignored (part of one damages the index). The lock's content means nothing.
FOUND = {INDEX: "its index is damaged", "entries": "failed its checksum"}
MENDED_BY_SQLITE = {INDEX + "-wal", INDEX + "-shm", INDEX + "-journal", INDEX + ".lock"}


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with pytest.MonkeyPatch.context() as patch:
        yield from serving(S3Server(free_port()), patch)


@pytest.fixture(scope="module")
def twin(s3: S3Server, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A 512 x 512 uint8 array of 8 x 8 chunks on S3 (`scale_arrays.values`); its URL."""
    local = write_twin(tmp_path_factory.mktemp("twin") / "twin.zarr", GRID, CHUNK)
    fsspec.filesystem("s3", **s3.uploading_options()).put(str(local), f"{s3.bucket}/twin.zarr",
                                                          recursive=True)
    return f"s3://{s3.bucket}/twin.zarr"


@pytest.fixture(scope="module")
def pristine(s3: S3Server, twin: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A disk cache holding the whole twin, as a daemon killed (-9) once it had read it leaves
    it: its index with a WAL and a -shm beside it."""
    where = tmp_path_factory.mktemp("pristine")
    cache = where / "cache"
    with mounted(twin, where / "mnt", options(s3, cache)) as mount:
        assert mount.data.read_bytes() == EXPECTED
        wait_for_entries(cache, ENTRIES)
        mount.process.kill()
        mount.process.wait(timeout=10)
    assert {INDEX + "-wal", INDEX + "-shm"} <= {p.name for p in cache.iterdir()}
    return cache


@pytest.fixture(scope="module")
def journal(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """The journal beside the index, in a case of its own: a hot journal of another database
    (a leftover that SQLite would roll back into the index)."""
    return hot_journal(tmp_path_factory.mktemp("other") / "other.sqlite")


def options(server: S3Server, cache: Path, *more: str) -> list[str]:
    return [f"endpoint_url={server.endpoint_url}", f"disk_cache={cache}", *more]


def hot_journal(path: Path) -> bytes:
    """The rollback journal of a transaction in flight on another database, as a crash in
    it would leave it."""
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as db:
        db.execute("PRAGMA cache_size=1")  # (pages spill: the journal is written as it goes)
        db.execute("CREATE TABLE t (x)")
        db.execute("INSERT INTO t VALUES (randomblob(3000))")
        db.execute("BEGIN")
        db.executemany("INSERT INTO t VALUES (randomblob(3000))", [()] * 100)
        db.execute("UPDATE t SET x = randomblob(3000)")
        journal = Path(f"{path}-journal").read_bytes()
        db.execute("ROLLBACK")
    assert len(journal) > 4096
    return journal


def wait_for_entries(cache: Path, count: int, patience: float = 30.0) -> None:
    """Until `cache` holds `count` entries, none being written."""
    deadline = time.monotonic() + patience
    while True:
        names = [p.name for p in (cache / "objects").iterdir()]
        if len(names) >= count and not any(n.endswith(".part") for n in names):
            return
        assert time.monotonic() < deadline, f"{len(names)} entries in {cache}, not {count}"
        time.sleep(0.02)


def damage(path: Path, how: str) -> None:
    path.write_bytes(DAMAGES[how](path.read_bytes()))  # (in place: the same file, if open)


def read_again(mount: Mount) -> bytes:
    """`data` read whole, from the daemon: not from the kernel's page cache."""
    fd = os.open(mount.data, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    return mount.data.read_bytes()


def said(mount: Mount) -> list[str]:
    """What the daemon's log says of the disk cache."""
    return [line for line in mount.log().splitlines() if "disk cache" in line]


def agree(cache: Path) -> int:
    """That the files of `cache` and its index agree (every file a ready row, every row a
    file, none claimed, the total their sum); how many entries it holds."""
    files = {p.name for p in (cache / "objects").iterdir()}
    with contextlib.closing(sqlite3.connect(cache / INDEX)) as index:
        ready = {name for (name,) in index.execute("SELECT name FROM entries WHERE owner IS NULL")}
        claimed = index.execute("SELECT count(*) FROM entries WHERE owner IS NOT NULL").fetchone()[0]
        total, summed = index.execute(
            "SELECT (SELECT cost FROM total), (SELECT coalesce(sum(cost), 0) FROM entries)").fetchone()
    assert files == ready and claimed == 0 and total == summed, (files ^ ready, claimed, total, summed)
    return len(files)


CASES = [(name, how) for name in (INDEX, INDEX + "-wal", INDEX + "-shm", INDEX + "-journal", INDEX + ".lock",
                                  "entries") for how in DAMAGES]
WHOLE = "whole, of another database"


@pytest.mark.parametrize(("name", "how"), [*CASES, (INDEX + "-journal", WHOLE)])
def test_a_damaged_file_of_the_cache_costs_nothing_but_its_entries(
        s3: S3Server, twin: str, pristine: Path, journal: bytes, tmp_path: Path, name: str, how: str) -> None:
    cache = tmp_path / "cache"
    shutil.copytree(pristine, cache)
    assert {p.name for p in cache.iterdir()} - {"objects"} <= {INDEX, *MENDED_BY_SQLITE}  # (each file a case)
    if name == INDEX + "-journal":  # (none beside a WAL: a leftover one, damaged or whole)
        (cache / name).write_bytes(journal if how == WHOLE else DAMAGES[how](journal))
    else:
        for path in sorted((cache / "objects").iterdir()) if name == "entries" else [cache / name]:
            damage(path, how)
    with mounted(twin, tmp_path / "mnt", options(s3, cache)) as mount:
        assert mount.data.read_bytes() == EXPECTED
        wait_for_entries(cache, ENTRIES)
    lines = said(mount)
    if name in FOUND or how == WHOLE:
        assert len(lines) == 1 and FOUND.get(name, FOUND[INDEX]) in lines[0], lines
    else:
        healed = ("lost changes", FOUND[INDEX])
        assert len(lines) <= 1 and all(any(h in line for h in healed) for line in lines), lines
    assert agree(cache) == ENTRIES  # (what was dropped, fetched again and kept)


def test_a_file_where_the_entries_directory_was(s3: S3Server, twin: str, pristine: Path,
                                                tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    shutil.copytree(pristine, cache)
    shutil.rmtree(cache / "objects")
    (cache / "objects").write_bytes(b"garbage")
    with mounted(twin, tmp_path / "mnt", options(s3, cache)) as mount:
        assert mount.data.read_bytes() == EXPECTED
        wait_for_entries(cache, ENTRIES)
    lines = said(mount)
    assert len(lines) == 1 and f"{ENTRIES} of its entries without a file dropped" in lines[0], lines
    assert agree(cache) == ENTRIES


@pytest.fixture(scope="module")
def big_twin(s3: S3Server, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, bytes]:
    """A 2048 x 2048 twin of 16 x 16 chunks: more than a mount's memory cache of 1 MiB holds,
    so that reading it again reads the disk cache. Its URL and its values."""
    local = write_twin(tmp_path_factory.mktemp("big") / "big.zarr", (16, 16), (128, 128))
    fsspec.filesystem("s3", **s3.uploading_options()).put(str(local), f"{s3.bucket}/big.zarr", recursive=True)
    return f"s3://{s3.bucket}/big.zarr", values((0, 0), (2048, 2048)).tobytes()


def test_entries_damaged_under_a_running_daemon_are_fetched_again(s3: S3Server, big_twin: tuple[str, bytes],
                                                                  tmp_path: Path) -> None:
    url, expected = big_twin
    cache = tmp_path / "cache"
    with mounted(url, tmp_path / "mnt", options(s3, cache, "cache=1M")) as mount:
        assert mount.data.read_bytes() == expected
        wait_for_entries(cache, 16 * 16 + 1)
        for i, entry in enumerate(sorted((cache / "objects").iterdir())):
            damage(entry, list(DAMAGES)[i % len(DAMAGES)])
        assert read_again(mount) == expected
        wait_for_entries(cache, 16 * 16 + 1)
    lines = said(mount)
    assert len(lines) == 1 and "failed its checksum" in lines[0], lines
    assert agree(cache) == 16 * 16 + 1


@pytest.mark.parametrize("how", list(DAMAGES))
def test_an_index_damaged_under_a_running_daemon(s3: S3Server, big_twin: tuple[str, bytes], tmp_path: Path,
                                                 how: str) -> None:
    """The daemon may never read its index's damaged pages (SQLite holds those it read in
    memory): it reads on, right, whichever it finds; so does the next mount."""
    url, expected = big_twin
    cache = tmp_path / "cache"
    with mounted(url, tmp_path / "mnt", options(s3, cache, "cache=1M")) as mount:
        assert mount.data.read_bytes() == expected
        wait_for_entries(cache, 16 * 16 + 1)
        with open(cache / INDEX, "r+b") as index:  # (in place: the file the daemon has open)
            damaged = DAMAGES[how](index.read())
            index.seek(0)
            index.truncate()
            index.write(damaged)
        assert read_again(mount) == expected
    assert len(said(mount)) <= 1, said(mount)
    with mounted(url, tmp_path / "again", options(s3, cache, "cache=1M")) as again:
        assert again.data.read_bytes() == expected
        assert read_again(again) == expected
    # (what the first daemon wrote back may have mended it: said at most once, if found)
    assert len(said(again)) <= 1 and all("its index is damaged" in line for line in said(again)), said(again)
    # Kept again: every chunk read since the damage was found, as the index opened or by a
    # read (the check as it opens does not compare its indexes with its table).
    assert agree(cache) > 0


def test_a_daemon_sharing_the_directory_follows_the_index_another_started_afresh(
        s3: S3Server, big_twin: tuple[str, bytes], tmp_path: Path) -> None:
    url, expected = big_twin
    cache = tmp_path / "cache"
    with mounted(url, tmp_path / "first", options(s3, cache, "cache=1M")) as first:
        assert first.data.read_bytes() == expected
        wait_for_entries(cache, 16 * 16 + 1)
        damage(cache / INDEX, "garbage")
        with mounted(url, tmp_path / "second", options(s3, cache, "cache=1M")) as second:
            lines = said(second)
            assert len(lines) == 1 and "its index is damaged" in lines[0], lines
            assert second.data.read_bytes() == expected
            assert read_again(first) == expected  # (its entries are gone: fetched again)
        assert read_again(first) == expected
    assert len(said(first)) <= 1, said(first)
    assert agree(cache) == 16 * 16 + 1  # (the first daemon's entries went into the new index)
