"""The disk cache after a restart, against a real (moto) S3 server without a mount: the rows of
cached chunks ahead of a sequential reader are checked by the cache's own threads, a batch at
a time, before the reader gets there (`CachedReads._check_ahead`)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import fsspec
import pytest

from tests.helpers.disk_cache_stores import cached_then_reopened
from tests.helpers.mounting import wait_until
from tests.helpers.netproxy import proxied
from tests.helpers.s3_server import S3Server, free_port, serving
from tests.helpers.store_observers import Listings
from zarrfs.store.disk_cache import freshness as disk_cache_freshness

ROWS, PER_ROW = 24, 12  # (enough a row for a listing: `many.stats`)


@pytest.fixture
def s3_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[S3Server]:
    yield from serving(S3Server(free_port()), monkeypatch)


def test_a_reader_entering_a_batch_anywhere_has_the_next_batch_checked(s3_server: S3Server,
                                                                       tmp_path: Path) -> None:
    # A batch of rows may be checked only after the reader passed its first row: entering
    # any of its rows has the next batch checked (once the chain broke there, and the reader
    # listed every row after it itself, waiting a round trip each).
    stored = {f"c/{row}/{column}": b"chunk %d %d" % (row, column)
              for row in range(ROWS) for column in range(PER_ROW)}
    seen = Listings()
    again = cached_then_reopened(s3_server, tmp_path, "rows", stored, list(stored), seen)
    assert again.disk_cache is not None
    again.disk_cache.rechecking(again, holds=ROWS * PER_ROW * 100)  # (a grid past one listing)
    wait_until(lambda: seen.rows() >= set(range(9)), 20,
               f"the first row and the batch after it: {seen.listed}")
    assert seen.rows() == set(range(9))
    for row in (3, 4, 5):  # (inside the batch, not at its first row)
        for column in range(PER_ROW):
            found = again.read(f"c/{row}/{column}")
            assert found is not None and bytes(found.data) == b"chunk %d %d" % (row, column)
            time.sleep(0.01)
    wait_until(lambda: seen.rows() >= set(range(17)), 20,
               f"rows 9-16 checked ahead; listed {sorted(seen.rows())}")
    assert len(seen.listed) == len(set(seen.listed)), seen.listed  # (each row listed once)
    assert all("/c/" not in key or key.endswith("zarr.json") for key in seen.others), seen.others


def test_reads_are_local_while_the_cache_serves_them(s3_server: S3Server, tmp_path: Path) -> None:
    # What picks a mount's loader threads (`LoaderPool`): an array with cached chunks is
    # opened with its reads taken as local; a miss makes them wait on the store, and a run
    # of hits local again.
    stored = {f"c/0/{column}": b"chunk %d" % column for column in range(2 * PER_ROW)}
    again = cached_then_reopened(s3_server, tmp_path, "line", stored, list(stored)[:PER_ROW])
    reads = again.disk_cache
    assert reads is not None and not reads.served_locally()
    reads.rechecking(again, holds=2 * PER_ROW)
    assert reads.served_locally()
    assert again.read(f"c/0/{PER_ROW}") is not None  # (not cached)
    assert not reads.served_locally()
    for column in range(PER_ROW):
        found = again.read(f"c/0/{column}")
        assert found is not None and bytes(found.data) == b"chunk %d" % column
    assert reads.served_locally()


def test_a_larger_1d_arrays_cached_chunks_are_checked_a_block_at_a_time(s3_server: S3Server,
                                                                        tmp_path: Path) -> None:
    # A 1-D array's chunks have no rows, and past one listing's page (here 2,048 chunks) the
    # array is not listed whole: a cached chunk is checked with the others of its block, the
    # keys that begin as its key does but for its last two digits ("c/10": chunks 1000-1099,
    # 100-109 and 10), in one listing; once a HEAD of each.
    stored = {f"c/{chunk}": b"chunk %d" % chunk for chunk in range(1000, 1064)}
    seen = Listings()
    again = cached_then_reopened(s3_server, tmp_path, "line", stored,
                                 [f"c/{chunk}" for chunk in range(1020, 1028)], seen)
    assert again.disk_cache is not None
    again.disk_cache.rechecking(again, holds=2048)
    for chunk in range(1020, 1028):
        found = again.read(f"c/{chunk}")
        assert found is not None and bytes(found.data) == b"chunk %d" % chunk
    assert len(seen.listed) == 1 and seen.listed[0].endswith("line/c"), seen.listed
    assert not [key for key in seen.others if "/c/" in key], seen.others
    assert again.disk_cache.cache.hits == 8 and again.disk_cache.cache.misses == 0


def test_chunks_are_read_while_their_check_is_in_flight_and_confirmed_after(
        s3_server: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A stream reads the chunks the disk cache holds while the listing that checks them is in
    # flight, and serves nothing made of them until it answers (`confirm`): the chunk another
    # writer changed meanwhile is named, and read again. The store is silent throughout the
    # early read: it cannot have waited for it. (The check waits for the store as long as the
    # test needs, however loaded the machine: past its usual 2 s, the cache would serve what it
    # holds unchecked, by design, and nothing would be found stale.)
    monkeypatch.setattr(disk_cache_freshness, "CHECK_SECONDS", 60.0)
    stored = {f"c/0/{column}": b"chunk %d" % column for column in range(PER_ROW)}
    seen = Listings()
    with proxied(s3_server.port) as proxy:
        again = cached_then_reopened(s3_server, tmp_path, "early", stored, list(stored), seen, proxy.url)
        fs = fsspec.filesystem("s3", **s3_server.s3fs_options())
        fs.pipe_file(f"{s3_server.bucket}/early/c/0/1", b"changed")
        assert again.disk_cache is not None
        proxy.swallow()
        before = seen.begun
        again.disk_cache.rechecking(again, holds=PER_ROW)  # (an open: the array's listing begins)
        wait_until(lambda: seen.begun > before, 20, "the listing that checks the cached chunks began")
        unchecked: dict[str, str] = {}
        found = again.read_many(list(stored), unchecked=unchecked)
        assert [None if f is None else bytes(f.data) for f in found] == list(stored.values())
        assert sorted(unchecked) == sorted(stored)
        assert again.cached_on_disk is not None
        confirmed = again.cached_on_disk.confirm(unchecked)
        assert not confirmed.done()
        proxy.heal()
        assert confirmed.result(timeout=30) == {"c/0/1"}
        fresh = again.read("c/0/1")
        assert fresh is not None and bytes(fresh.data) == b"changed"
