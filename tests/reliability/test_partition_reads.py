"""A mount of S3 through a network partition: the S3 server (moto) is real and keeps running,
but the proxy between it and the mount accepts connections and swallows every byte, as a
partition does (a refused connection fails fast; this one would wait forever).

With `-o timeout=T`: stat, ls and reads of cached bytes answer at once; an open waits at most
2 s to learn whether other writers changed the file, then serves what the mount has; a read
of bytes the mount does not have fails with EIO within T, without holding up the reads it
can answer; a warm disk cache is what the mount has; readers of one shard share the load of
its index.

Each runs in both logging configurations an operator has: the daemon forked with no log
destination (no `log=`, no syslog in a container: it logs nowhere), and `-o log=FILE`."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers.mounting import Mount, mounted, pread, timed
from tests.helpers.netproxy import TcpProxy, proxied
from tests.helpers.partition_mounts import (
    AT_ONCE,
    CHUNKS,
    RECHECK_BOUND,
    SHAPE,
    SLACK,
    TIMEOUT,
    VALUES,
    assert_eio,
    assert_logged,
    mounted_logging,
    read_array,
    storage_options,
)
from tests.helpers.s3_server import S3Server
from zarrfs.array_metadata import open_array
from zarrfs.declared import OptionValues
from zarrfs.errors import StoreTimeout
from zarrfs.grid import Box
from zarrfs.store import Store
from zarrfs.store.settings import TIMEOUT as TIMEOUT_OPTION
from zarrfs.store.settings import SourceOptions

zarr = pytest.importorskip("zarr")


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
                           SourceOptions(OptionValues({TIMEOUT_OPTION: TIMEOUT}),
                                         {**storage_options(s3_server), "endpoint_url": proxy.url}))
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
