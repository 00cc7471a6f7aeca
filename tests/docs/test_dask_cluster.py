"""The Dask recipe of docs/clusters.md, run as written on a real `dask.distributed`
LocalCluster: worker processes, each mounting one S3 array (moto, as AWS itself) with the
docs' WorkerPlugin, tasks writing their rows of `data` and `fsync`ing; one worker killed
(SIGKILL) mid-run, its tasks retried by Dask. Nothing is lost, and the killed worker's mount
and daemon are gone (its mount ended with its process) while the others unmount at close."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import zarr

from tests.helpers.docs_examples import examples_of
from tests.helpers.mounting import is_mounted
from tests.helpers.s3_server import S3Server, free_port, serving

distributed = pytest.importorskip("distributed")

ROWS, COLUMNS = 64, 256
DTYPE = np.dtype("<u4")
ENDS_WITHIN = 60.0  # (a daemon's write-back and unmount, on a loaded machine)


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[S3Server]:
    server = S3Server(free_port(), bucket="bucket")
    for found in serving(server, monkeypatch):
        monkeypatch.setenv("AWS_ENDPOINT_URL", server.endpoint_url)  # (the workers inherit it)
        yield found


def the_docs_plugin() -> str:
    """The Python block of docs/clusters.md that defines the worker plugin and registers it."""
    blocks = [e.text for e in examples_of("docs/clusters.md") if "class ZarrMount" in e.text]
    assert len(blocks) == 1, "docs/clusters.md: one Dask block"
    return blocks[0]


def write_row(row: int, pause: float) -> int:
    """A task as the docs describe one: its region of `data` written and `fsync`ed before it
    returns (the worker's pid)."""
    worker = distributed.get_worker()
    time.sleep(pause)  # (tasks still running when a worker is killed)
    values = np.full(COLUMNS, row + 1, DTYPE)
    fd = os.open(worker.data_path / "data", os.O_WRONLY)
    try:
        os.pwrite(fd, values.tobytes(), row * COLUMNS * DTYPE.itemsize)
        os.fsync(fd)
    finally:
        os.close(fd)
    return os.getpid()


def zarrfs_mounts() -> set[str]:
    with open("/proc/mounts") as f:
        return {line.split()[1] for line in f if line.split()[2] == "fuse.zarrfs"}


def test_the_docs_dask_recipe_loses_nothing_when_a_worker_is_killed(s3: S3Server, tmp_path: Path) -> None:
    zarr.create_array("s3://bucket/era5.zarr", shape=(ROWS, COLUMNS), chunks=(8, 64), dtype=DTYPE,
                      fill_value=0, storage_options=s3.s3fs_options())
    before = zarrfs_mounts()
    with distributed.LocalCluster(n_workers=2, threads_per_worker=2, processes=True,
                                  dashboard_address=None, local_directory=str(tmp_path)) as cluster, \
            distributed.Client(cluster) as client:
        exec(the_docs_plugin(), {"client": client})  # (ZarrMount(...), registered as the docs do)
        mounts = client.run(lambda dask_worker: str(dask_worker.data_path))
        assert len(mounts) == 2 and all(is_mounted(Path(path)) for path in mounts.values())
        workers = client.run(os.getpid)
        futures = [client.submit(write_row, row, 0.2, pure=False) for row in range(ROWS)]
        victim_address, victim = next(iter(workers.items()))
        while not any(f.done() for f in futures):
            time.sleep(0.05)
        os.kill(victim, signal.SIGKILL)  # (mid-run: most tasks still queued or running)
        assert len(client.gather(futures)) == ROWS  # (the killed worker's tasks retried)
        deadline = time.monotonic() + ENDS_WITHIN
        while is_mounted(Path(mounts[victim_address])):
            assert time.monotonic() < deadline, "the killed worker's mount stayed"
            time.sleep(0.1)
        assert not Path(mounts[victim_address]).exists()  # (its temporary mountpoint removed)
    deadline = time.monotonic() + ENDS_WITHIN
    while zarrfs_mounts() - before:
        assert time.monotonic() < deadline, f"mounts left behind: {zarrfs_mounts() - before}"
        time.sleep(0.1)
    stored = zarr.open_array("s3://bucket/era5.zarr", mode="r", storage_options=s3.s3fs_options())[...]
    expected = np.repeat(np.arange(1, ROWS + 1, dtype=DTYPE)[:, None], COLUMNS, axis=1)
    assert np.array_equal(stored, expected)
