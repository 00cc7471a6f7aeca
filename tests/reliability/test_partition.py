"""A mount of S3 through a network partition: the S3 server (moto) is real and keeps running,
but the proxy between it and the mount accepts connections and swallows every byte, as a
partition does (a refused connection fails fast; this one would wait forever).

With `-o timeout=T`: stat, ls and reads of cached bytes answer at once; an open waits at most
2 s to learn whether other writers changed the file, then serves what the mount has; a read
of bytes the mount does not have fails with EIO within T, without holding up the reads it
can answer; a write is accepted into the cache and its fsync fails with EIO within T, the
data kept dirty; once the network heals, the next fsync stores it and uncached reads work,
without a remount.

Each runs in both logging configurations an operator has: the daemon forked with no log
destination (no `log=`, no syslog in a container: it logs nowhere), and `-o log=FILE`."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import s3fs

from tests.helpers.mounting import Mount, mounted, pread, timed
from tests.helpers.netproxy import TcpProxy, proxied
from tests.helpers.s3_server import S3Server
from zarrfs.array_metadata import open_array
from zarrfs.declared import OptionValues
from zarrfs.errors import StoreTimeout
from zarrfs.grid import Box
from zarrfs.store import Store
from zarrfs.store.settings import TIMEOUT as TIMEOUT_OPTION
from zarrfs.store.settings import SourceSettings

zarr = pytest.importorskip("zarr")

TIMEOUT = 4.0  # -o timeout= of these mounts
RECHECK_BOUND = 2.0  # what a check may wait for the store (zarrfs.store.settings.CHECK_SECONDS)
SLACK = 1.5  # scheduling on a busy 2-core machine
AT_ONCE = 0.5
SHAPE = (128, 256)
CHUNKS = (32, 32)
VALUES = {name: np.arange(SHAPE[0] * SHAPE[1], dtype="<f4").reshape(SHAPE) * sign
          for name, sign in (("cached", 1), ("uncached", -1))}


def storage_options(server: S3Server) -> dict[str, Any]:
    return {"endpoint_url": server.endpoint_url, "key": "testing", "secret": "testing"}


@pytest.fixture(params=["no-log", "log-file"])
def logging_to(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@contextlib.contextmanager
def mounted_logging(logging_to: str, source: str, mountpoint: Path,
                    options: list[str]) -> Iterator[Mount]:
    """`source` mounted with the daemon logging nowhere (forked, no `log=`) or to a file."""
    if logging_to == "no-log":
        with mounted(source, mountpoint, options, foreground=False) as mount:
            yield mount
        return
    log = mountpoint.parent / "daemon.log"
    with mounted(source, mountpoint, [*options, f"log={log}"]) as mount:
        mount.log_path = log
        yield mount


def assert_logged(mount: Mount, logging_to: str, pattern: str) -> None:
    if logging_to == "log-file":
        assert re.search(pattern, mount.log()), mount.log()


@pytest.fixture
def partitioned(s3_server: S3Server, tmp_path: Path,
                logging_to: str) -> Iterator[tuple[Mount, TcpProxy, S3Server]]:
    """A group of two arrays in S3, mounted through a proxy; the first array read whole."""
    group = zarr.open_group(f"s3://{s3_server.bucket}/group", mode="w",
                            storage_options=storage_options(s3_server))
    for name, values in VALUES.items():
        group.create_array(name, shape=SHAPE, chunks=CHUNKS, dtype="<f4", fill_value=0)[...] = values
    with proxied(s3_server.port) as proxy:
        # direct_io: every read reaches the daemon, so "cached" means the daemon's chunk cache.
        options = [f"endpoint_url={proxy.url}", f"timeout={TIMEOUT:g}", "direct_io"]
        source = f"s3://{s3_server.bucket}/group"
        with mounted_logging(logging_to, source, tmp_path / "mnt", options) as mount:
            cached = read_array(mount, "cached")
            assert np.array_equal(cached, VALUES["cached"])
            assert sorted(os.listdir(mount.path)) == ["cached", "data.h5", "data.nc", "uncached", "zarr.json"]
            assert sorted(os.listdir(mount.path / "uncached")) == sorted(os.listdir(mount.path / "cached"))
            yield mount, proxy, s3_server


def read_array(mount: Mount, name: str) -> np.ndarray:
    return np.frombuffer((mount.path / name / "data").read_bytes(), "<f4").reshape(SHAPE)


def assert_eio(result: Any) -> None:
    assert isinstance(result, OSError) and result.errno == errno.EIO, result


@pytest.mark.fast
def test_a_partition_degrades_to_cached_data_and_bounded_eio(
        partitioned: tuple[Mount, TcpProxy, S3Server], logging_to: str) -> None:
    mount, proxy, _ = partitioned
    cached, uncached = mount.path / "cached" / "data", mount.path / "uncached" / "data"
    proxy.swallow()

    # The first open asks the store whether another writer changed the array, and gives up
    # after the recheck bound; the bytes come from the cache.
    first, took = timed(lambda: pread(cached, 4096, 0))
    assert first == VALUES["cached"].tobytes()[:4096]
    assert took < RECHECK_BOUND + SLACK
    # The next opens do not wait again while the store stays silent.
    for offset in (0, 65536, SHAPE[0] * SHAPE[1] * 4 - 4096):
        again, took = timed(lambda offset=offset: pread(cached, 4096, offset))
        assert again == VALUES["cached"].tobytes()[offset : offset + 4096]
        assert took < AT_ONCE
    metadata = mount.path / "cached" / "zarr.json"
    for action in (lambda: os.stat(cached), lambda: os.listdir(mount.path),
                   lambda: os.listdir(mount.path / "cached"), metadata.read_bytes):
        result, took = timed(action)
        assert not isinstance(result, OSError), result
        assert took < AT_ONCE

    # Bytes the mount does not have: EIO within the timeout, not a hang.
    missing, took = timed(lambda: pread(uncached, 4096, 0))
    assert_eio(missing)
    assert took < TIMEOUT + SLACK
    assert_logged(mount, logging_to, "no answer")


def test_a_fresh_open_reads_cached_bytes_at_once_beside_a_silent_store(
        s3_server: S3Server, tmp_path: Path, logging_to: str) -> None:
    """The first half of an array read, then the store silent: a new open of `data` and a
    1 MiB read of that half answer at once. A sequential reader's slab (the rows ahead it
    decodes, here the whole array) holds uncached rows too, and its jobs queue on loader
    threads behind loads waiting on the store: reading the cached bytes from the cache, not
    from the slab, is what answers them (they used to wait the whole timeout, or more)."""
    shape, chunks = (512, 1024), (64, 256)
    values = np.arange(shape[0] * shape[1], dtype="<f4").reshape(shape)
    zarr.create_array(f"s3://{s3_server.bucket}/halves", shape=shape, chunks=chunks, dtype="<f4",
                      fill_value=0, storage_options=storage_options(s3_server))[...] = values
    half = values.nbytes // 2
    with proxied(s3_server.port) as proxy, mounted_logging(
            logging_to, f"s3://{s3_server.bucket}/halves", tmp_path / "mnt",
            [f"endpoint_url={proxy.url}", f"timeout={TIMEOUT:g}", "direct_io"]) as mount:
        # Through the chunk files, which read ahead only inside their chunk: exactly the
        # first half's chunks in the cache.
        for i in range(shape[0] // chunks[0] // 2):
            for j in range(shape[1] // chunks[1]):
                block = values[i * chunks[0] : (i + 1) * chunks[0], j * chunks[1] : (j + 1) * chunks[1]]
                assert mount.chunk(f"c/{i}/{j}").read_bytes() == block.tobytes()
        proxy.swallow()
        pread(mount.data, 4096, 0)  # (the open after the partition waits for the recheck bound)
        for _ in range(3):
            fd, opened = timed(lambda: os.open(mount.data, os.O_RDONLY))
            try:
                read, took = timed(lambda fd=fd: os.pread(fd, half, 0))
            finally:
                os.close(fd)
            assert isinstance(read, bytes) and len(read) == half, (read, took)  # (short: EIO)
            assert read == values.tobytes()[:half]
            assert opened + took < AT_ONCE, (opened, took)


def test_a_warm_disk_cache_is_what_the_mount_has_through_a_partition(
        s3_server: S3Server, tmp_path: Path) -> None:
    """An array read through a mount with `-o disk_cache`, then read by a new daemon (its
    memory cache empty, its directories listed) once the store went silent: the disk cache's
    entries are what the mount has, served
    unchecked after one check that waits the check bound at most (the log says so); what the
    disk cache does not hold fails with EIO within the timeout. Before, a remount served
    nothing of it during a partition: every entry waits for a check."""
    source = f"s3://{s3_server.bucket}/warm"
    group = zarr.open_group(source, mode="w", storage_options=storage_options(s3_server))
    for name, values in VALUES.items():
        group.create_array(name, shape=SHAPE, chunks=CHUNKS, dtype="<f4", fill_value=0)[...] = values
    cache, log = tmp_path / "cache", tmp_path / "daemon.log"
    with proxied(s3_server.port) as proxy:
        options = [f"endpoint_url={proxy.url}", f"timeout={TIMEOUT:g}", f"disk_cache={cache}", f"log={log}",
                   "direct_io"]  # (as `partitioned`: one read, one request)
        with mounted(source, tmp_path / "first", options) as first:
            assert np.array_equal(read_array(first, "cached"), VALUES["cached"])
        with mounted(source, tmp_path / "second", options) as mount:
            assert sorted(os.listdir(mount.path / "cached")) == sorted(os.listdir(mount.path / "uncached"))
            proxy.swallow()
            found, took = timed(lambda: read_array(mount, "cached"))
            assert isinstance(found, np.ndarray) and np.array_equal(found, VALUES["cached"]), found
            assert took < RECHECK_BOUND + SLACK, took
            assert "the disk cache's entries are served unchecked" in log.read_text()
            missing, took = timed(lambda: pread(mount.path / "uncached" / "data", 4096, 0))
            assert_eio(missing)
            assert took < TIMEOUT + SLACK


def test_a_read_waiting_on_the_store_holds_up_no_other(
        partitioned: tuple[Mount, TcpProxy, S3Server]) -> None:
    mount, proxy, _ = partitioned
    cached, uncached = mount.path / "cached" / "data", mount.path / "uncached" / "data"
    pread(cached, 4096, 0)  # (opened once before the partition: no recheck to wait for below)
    fd = os.open(uncached, os.O_RDONLY)  # (the open's own wait is the other test's business)
    proxy.swallow()
    outcome: list[Any] = []
    waiting = threading.Thread(target=lambda: outcome.append(timed(lambda: os.pread(fd, 1 << 20, 0))))
    waiting.start()
    try:
        time.sleep(0.3)  # (let the uncached read reach the daemon first; not a synchronization)
        served = []
        for offset in range(0, 16 * 4096, 4096):
            data, took = timed(lambda offset=offset: pread(cached, 4096, offset))
            served.append((data == VALUES["cached"].tobytes()[offset : offset + 4096], took))
        assert waiting.is_alive(), "the uncached read ended before the cached ones were asked"
    finally:
        waiting.join(TIMEOUT + 10)
        os.close(fd)
    assert all(ok for ok, _ in served)
    assert max(took for _, took in served) < RECHECK_BOUND + SLACK
    assert sorted(took for _, took in served)[len(served) // 2] < AT_ONCE
    result, took = outcome[0]
    assert_eio(result)
    assert took < TIMEOUT + SLACK


def test_readers_of_one_shard_share_the_load_of_its_index(s3_server: S3Server) -> None:
    """Readers of four inner chunks of one shard, the store silent: their loads wait for one
    load of the shard's index (here with its bytes: a small shard is fetched whole), whose
    failure fails them all within the timeout. They used to wait for the shard's lock in
    turn, each its own timeout (the fourth: four), holding loader threads all that time
    (a read through the mount gives up at the timeout; its loads went on). After the heal
    each reads its values. The array layer's reads, which wait for their loads."""
    shape, chunks = (128, 1024), (32, 1024)  # a shard of four inner chunks of 32 rows each
    values = np.arange(shape[0] * shape[1], dtype="<f4").reshape(shape)
    zarr.create_array(f"s3://{s3_server.bucket}/sharded", shape=shape, shards=shape, chunks=chunks,
                      dtype="<f4", fill_value=0, storage_options=storage_options(s3_server))[...] = values
    rows = {row: Box((row, 0), (row + 1, shape[1])) for row in range(1, shape[0], chunks[0])}
    outcomes: dict[int, Any] = {}
    with proxied(s3_server.port) as proxy:
        store = Store.open(f"s3://{s3_server.bucket}/sharded",
                           {**storage_options(s3_server), "endpoint_url": proxy.url},
                           settings=SourceSettings(OptionValues({TIMEOUT_OPTION: TIMEOUT})))
        array = open_array(store, threads=len(rows))
        try:
            proxy.swallow()
            readers = [threading.Thread(target=lambda row=row: outcomes.update(
                {row: timed(lambda: array.read(rows[row]))})) for row in rows]
            for reader in readers:
                reader.start()
            for reader in readers:
                reader.join(len(rows) * TIMEOUT + 10)
            assert sorted(outcomes) == sorted(rows)
            for row, (result, took) in outcomes.items():
                assert isinstance(result, StoreTimeout), (row, result)
                assert took < TIMEOUT + SLACK, (row, took)

            proxy.heal()
            for row, box in rows.items():
                assert np.array_equal(array.read(box)[0], values[row])
        finally:
            array.close()


def test_a_write_during_a_partition_is_kept_and_stored_once_it_heals(
        partitioned: tuple[Mount, TcpProxy, S3Server]) -> None:
    mount, proxy, server = partitioned
    cached = mount.path / "cached" / "data"
    row = np.full(SHAPE[1], 7.25, dtype="<f4")
    fd = os.open(cached, os.O_WRONLY)
    try:
        proxy.swallow()
        written, took = timed(lambda: os.pwrite(fd, row.tobytes(), 5 * SHAPE[1] * 4))
        assert written == row.nbytes
        assert took < RECHECK_BOUND + SLACK
        failed, took = timed(lambda: os.fsync(fd))
        assert_eio(failed)
        assert took < TIMEOUT + SLACK
        # Still dirty, and still what the mount shows.
        assert pread(cached, row.nbytes, 5 * SHAPE[1] * 4) == row.tobytes()
        assert mount_stats_dirty(mount) > 0

        proxy.heal()
        stored, took = timed(lambda: os.fsync(fd))
        assert stored is None, stored
    finally:
        os.close(fd)
    expected = VALUES["cached"].copy()
    expected[5] = row
    # Read from S3 directly, not through the proxy or the mount.
    on_s3 = zarr.open_array(f"s3://{server.bucket}/group/cached", mode="r",
                            storage_options=storage_options(server))
    assert np.array_equal(np.asarray(on_s3[...]), expected)
    # Uncached reads work again without a remount.
    assert np.array_equal(read_array(mount, "uncached"), VALUES["uncached"])


def mount_stats_dirty(mount: Mount) -> int:
    import json

    stats = json.loads(os.getxattr(mount.path, "user.zarrfs.stats"))
    return int(stats["dirty_bytes"])


def test_a_write_into_a_shard_during_a_partition_keeps_the_rest_of_the_shard(
        s3_server: S3Server, tmp_path: Path, logging_to: str) -> None:
    """A write into part of a shard nothing was read from: the write-back needs the stored
    shard (to keep its other inner chunks), which the partition withholds; the fsync fails
    within the timeout, the data stays dirty, and once healed the shard is stored whole."""
    values = np.arange(SHAPE[0] * SHAPE[1], dtype="<f4").reshape(SHAPE)
    on_s3 = zarr.create_array(f"s3://{s3_server.bucket}/sharded", shape=SHAPE, shards=(64, 128),
                              chunks=CHUNKS, dtype="<f4", fill_value=0,
                              storage_options=storage_options(s3_server))
    on_s3[...] = values
    row = np.full(SHAPE[1] // 2, -3.5, dtype="<f4")  # (half a row: partial inner chunks)
    where = (5 * SHAPE[1] + 16) * 4
    with proxied(s3_server.port) as proxy, mounted_logging(
            logging_to, f"s3://{s3_server.bucket}/sharded", tmp_path / "mnt",
            [f"endpoint_url={proxy.url}", f"timeout={TIMEOUT:g}", "direct_io"]) as mount:
        data = mount.path / "data"
        fd = os.open(data, os.O_WRONLY)
        try:
            proxy.swallow()
            written, took = timed(lambda: os.pwrite(fd, row.tobytes(), where))
            assert written == row.nbytes
            assert took < AT_ONCE + SLACK
            failed, took = timed(lambda: os.fsync(fd))
            assert_eio(failed)
            assert took < TIMEOUT + SLACK
            assert mount_stats_dirty(mount) > 0
            assert pread(data, row.nbytes, where) == row.tobytes()  # (what the mount shows)

            proxy.heal()
            stored, took = timed(lambda: os.fsync(fd))
            assert stored is None, stored
        finally:
            os.close(fd)
        assert mount_stats_dirty(mount) == 0
    expected = values.copy()
    expected[5, 16 : 16 + row.size] = row
    reread = zarr.open_array(f"s3://{s3_server.bucket}/sharded", mode="r",
                             storage_options=storage_options(s3_server))
    assert np.array_equal(np.asarray(reread[...]), expected)


def test_metadata_edits_during_a_partition_fail_within_the_timeout_and_work_after(
        partitioned: tuple[Mount, TcpProxy, S3Server], logging_to: str) -> None:
    mount, proxy, server = partitioned
    data = mount.path / "cached" / "data"
    size = data.stat().st_size
    grown = size + SHAPE[1] * 4 * CHUNKS[0]  # (a row of chunks more)
    edits = {
        "resize": lambda: os.truncate(data, grown),
        "attributes": lambda: os.setxattr(mount.path / "cached", "user.zarr.attributes", b'{"x": 1}'),
        "group": lambda: os.mkdir(mount.path / "made"),
    }
    proxy.swallow()
    for name, edit in edits.items():
        failed, took = timed(edit)
        assert_eio(failed)
        # (a new name is first looked for among other writers' changes: the recheck bound)
        assert took < TIMEOUT + (RECHECK_BOUND if name == "group" else 0) + SLACK, name
    assert data.stat().st_size == size  # (nothing changed)
    assert sorted(os.listdir(mount.path)) == ["cached", "data.h5", "data.nc", "uncached", "zarr.json"]
    # The request's deadline and its store call's are the same 4 s: either may fire first, and
    # the line names the operation (and the key when the store call's fired).
    assert_logged(mount, logging_to,
                  rf"ERROR setattr: (store key '\S+': )?no answer (from the store )?within {TIMEOUT:g} s")

    proxy.heal()
    for name, edit in edits.items():
        done, _ = timed(edit)
        assert done is None, (name, done)
    group = zarr.open_group(f"s3://{server.bucket}/group", mode="r", storage_options=storage_options(server))
    assert group["cached"].shape == (SHAPE[0] + CHUNKS[0], SHAPE[1])
    assert dict(group["cached"].attrs) == {"x": 1}
    assert "made" in set(group.group_keys())


def test_uploads_deletes_and_moves_during_a_partition_leave_the_store_as_it_was(
        partitioned: tuple[Mount, TcpProxy, S3Server], tmp_path: Path) -> None:
    """Each fails with EIO in bounded time and changes no key in the store: no array made
    half, deleted half or moved half."""
    mount, proxy, server = partitioned
    upload = tmp_path / "up.npy"
    np.save(upload, np.arange(512 * 64, dtype="<f4").reshape(512, 64))
    fs = s3fs.S3FileSystem(**storage_options(server))

    def stored() -> dict[str, str]:
        fs.invalidate_cache()
        return {path: info["ETag"] for path, info in fs.find(f"{server.bucket}/group", detail=True).items()}

    before = stored()
    os.listdir(mount.path / "uncached")  # (listed before: rm -r needs its names)
    proxy.swallow()
    for name, action in {"upload": lambda: shutil.copyfile(upload, mount.path / "up.npy"),
                         "delete": lambda: shutil.rmtree(mount.path / "uncached"),
                         "move": lambda: os.rename(mount.path / "cached", mount.path / "moved")}.items():
        failed, took = timed(action)
        assert isinstance(failed, OSError), (name, failed)
        # (an upload is refused at its first write, its retries and its close: a few timeouts)
        assert took < 3 * (TIMEOUT + SLACK) + RECHECK_BOUND, (name, took)
    assert stored() == before
    proxy.heal()
    assert sorted(os.listdir(mount.path)) == ["cached", "data.h5", "data.nc", "uncached", "zarr.json"]
    assert np.array_equal(read_array(mount, "uncached"), VALUES["uncached"])
    assert stored() == before
