"""The disk cache (`-o disk_cache=DIR,disk_cache_size=SIZE`) of real mounts of a moto S3 server
and its directory: DIR never holds more than SIZE while two daemons' readers fill it; a daemon
uses what another cached; a fault of the cache (the directory removed) fails no read, and a
bad directory fails the mount in one line."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.disk_cache_mounts import EXPECTED, GRID, options, whole
from tests.helpers.mounting import ZARRFS, MountFactory, pread
from tests.helpers.mounting import mount_stats as stats
from tests.helpers.s3_server import S3Server
from tests.helpers.scale_arrays import RequestLog

MIB = 1 << 20


def du(directory: Path) -> int:
    """What `du` says `directory` takes on disk, in bytes."""
    # (du says what it could: a file deleted while it walks is not counted, and it exits 1)
    found = subprocess.run(["du", "-s", "-B1", str(directory)], capture_output=True, text=True)
    return int(found.stdout.split()[0])


def test_two_daemons_fill_one_directory_within_its_size(s3_server: S3Server, tmp_path: Path,
                                                        mount_array: MountFactory) -> None:
    """Uncompressible chunks of 256 KiB, 24 MiB of them, read by two daemons at once with a
    cache of 8 MiB: du never says more than 8 MiB; what both read is right."""
    url, noise = noise_array(s3_server)
    cache, size = tmp_path / "cache", 8 * MIB
    mounts = [mount_array(url, options(s3_server, cache, f"disk_cache_size={size}", "cache=1M"))
              for _ in range(2)]
    done = threading.Event()
    sizes: list[int] = []

    def watch() -> None:
        while not done.is_set():
            sizes.append(du(cache))

    watcher = threading.Thread(target=watch)
    watcher.start()
    results: list[bytes] = []
    try:
        readers = [threading.Thread(target=lambda m=m: results.append(whole(m))) for m in mounts * 2]
        for reader in readers:
            reader.start()
        for reader in readers:
            reader.join()
    finally:
        done.set()
        watcher.join()
    assert results == [noise.tobytes()] * 4
    assert len(sizes) > 5 and max(sizes) <= size, (max(sizes), len(sizes))
    assert all(stats(m)["disk_cache_bytes"] <= size for m in mounts)


def test_a_daemon_uses_what_another_cached(s3_server: S3Server, twin: str, tmp_path: Path,
                                           mount_array: MountFactory) -> None:
    cache = tmp_path / "cache"
    log = RequestLog(tmp_path / "requests.log")
    first = mount_array(twin, options(s3_server, cache))
    second = mount_array(twin, options(s3_server, cache), env=log.env)
    assert whole(first) == EXPECTED
    log.take()
    assert whole(second) == EXPECTED
    requests = log.take()
    assert requests.read() <= 1, requests.summary()
    assert stats(second)["disk_cache_hits"] >= GRID[0] * GRID[1]


def test_a_cache_directory_removed_while_mounted_fails_no_read(s3_server: S3Server, tmp_path: Path,
                                                               mount_array: MountFactory) -> None:
    url, noise = noise_array(s3_server)  # (24 MiB: more than read ahead before the removal)
    cache = tmp_path / "cache"
    mount = mount_array(url, options(s3_server, cache, "cache=1M", f"log={tmp_path / 'daemon.log'}"))
    assert pread(mount.data, 2048 * 256, 0) == noise[:256].tobytes()  # (a row of chunks)
    # (moved away first: the daemon may be adding entries while rmtree walks the directory)
    shutil.rmtree(cache.rename(tmp_path / "removed"), ignore_errors=True)
    assert not cache.exists()
    assert whole(mount) == noise.tobytes()
    warnings = [line for line in (tmp_path / "daemon.log").read_text().splitlines() if "disk cache" in line]
    assert 1 <= len(warnings) <= 3, warnings  # (once for each kind of fault)


def noise_array(server: S3Server) -> tuple[str, np.ndarray]:
    """24 MiB that do not compress, in chunks of 256 KiB, on S3: its URL and values."""
    import zarr

    url = f"s3://{server.bucket}/noise.zarr"
    noise = np.random.default_rng(5).integers(0, 255, (3072, 2048), dtype=np.uint8)
    zarr.create_array(zarr.storage.FsspecStore.from_url(url, storage_options=server.s3fs_options()),
                      data=noise, chunks=(256, 256), compressors=None)
    return url, noise


@pytest.mark.parametrize("make", ["a file", "a directory of other files"])
def test_a_bad_cache_directory_fails_the_mount_in_one_line(s3_server: S3Server, twin: str, tmp_path: Path,
                                                           make: str) -> None:
    bad = tmp_path / "bad"
    if make == "a file":
        bad.write_text("x")
    else:
        bad.mkdir()
        (bad / "notes.txt").write_text("mine")
    (tmp_path / "mnt").mkdir()
    result = subprocess.run([ZARRFS, "mount", twin, str(tmp_path / "mnt"), "-o",
                             ",".join(options(s3_server, bad))], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "disk cache" in lines[0] and "Traceback" not in result.stderr, result.stderr
    assert not os.path.ismount(tmp_path / "mnt")
