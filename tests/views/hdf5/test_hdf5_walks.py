"""Walks of data.h5's whole chunk index (issue 76): the tools that ask HDF5 for a dataset's storage
size (`h5ls -v`, `h5dump -p -H`, h5py's `get_storage_size` and `visititems`, HDF5 1.8's) make
it read every node of the index. On a sparse array of 10^6 chunks, three of them stored, a walk
costs about what its stored chunks cost: at most twice the requests of a walk of a 16-chunk
twin, plus listings (the rows of chunks stored, one listing of their directory), and a time
near the twin's. Every walker finds the same storage size: the stored chunks' sizes and the
fill chunk's for each chunk not stored (chunks passed through), or every chunk decoded.

Times are reported (`-s`) and bounded loosely here (a walk took 30-40 s before); what they are
against TensorStore's and the bare floor is benchmarks/hdf5_walks.py's."""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import h5py
import numpy as np
import pytest
import zarr

from tests.helpers.mounting import MountFactory
from tests.helpers.scale_arrays import ZLIB, ZSTD, Compression, RequestLog, Requests, write_twin

REPO = Path(__file__).resolve().parents[3]
OLD_PYTHON = REPO / ".venv-hdf5-1.8" / "bin" / "python"
CHUNK = (16, 16)
SPARSE = [(0, 0), (500, 700), (999, 999)]
ENV = {k: v for k, v in os.environ.items() if k != "HDF5_PLUGIN_PATH"}  # (no plugin at all)
SLACK = 5.0  # (seconds a walk of the giant may take past three of the twin's: loaded machines)


def storage_by_h5ls(path: Path) -> int:
    out = subprocess.run(["h5ls", "-v", str(path)], check=True, capture_output=True, text=True,
                         env=ENV).stdout
    found = re.search(r"Storage:\s+\d+ logical bytes, (\d+) allocated bytes", out)
    assert found, out
    return int(found.group(1))


def storage_by_h5dump(path: Path) -> int:
    out = subprocess.run(["h5dump", "-p", "-H", str(path)], check=True, capture_output=True, text=True,
                         env=ENV).stdout
    found = re.search(r"CHUNKED \([^)]*\)\s+SIZE (\d+)", out)
    assert found, out
    return int(found.group(1))


def storage_by_h5py(path: Path) -> int:
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, item: None)  # (h5py 3 asks each object's info: a walk)
        return int(f["data"].id.get_storage_size())


def storage_by_hdf5_1_8(path: Path) -> int:
    if not OLD_PYTHON.exists():
        pytest.skip(f"no {OLD_PYTHON} (bash scripts/install makes it when it finds a Python 3.6)")
    script = "import h5py, sys; print(h5py.File(sys.argv[1], 'r')['data'].id.get_storage_size())"
    out = subprocess.run([str(OLD_PYTHON), "-c", script, str(path)], check=True, capture_output=True,
                         text=True, env=ENV).stdout
    return int(out)


WALKERS: dict[str, Callable[[Path], int]] = {
    "h5ls": storage_by_h5ls, "h5dump": storage_by_h5dump, "h5py": storage_by_h5py,
    "hdf5-1.8": storage_by_hdf5_1_8}


def sharded(path: Path, grid: tuple[int, int], stored: list[tuple[int, int]]) -> Path:
    """A v3 array of `grid` inner chunks of 16 x 16 in shards of 32 x 32 of them, zlib
    (passed through as stored), its chunks `stored` written (some of a shard each)."""
    array = zarr.create_array(path, shape=(grid[0] * 16, grid[1] * 16), dtype="uint8", chunks=CHUNK,
                              shards=(512, 512), compressors=zarr.codecs.numcodecs.Zlib(level=1),
                              fill_value=0)
    for i, j in stored:
        array[i * 16:(i + 1) * 16, j * 16:(j + 1) * 16] = (i * 7 + j) % 251 + 1
    return path


@pytest.fixture(scope="module")
def twins(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str], tuple[Path, Path]]]:
    """(a 16-chunk twin, the sparse array of 10^6 chunks) by kind, written when first asked."""
    root = tmp_path_factory.mktemp("walks")
    made: dict[str, tuple[Path, Path]] = {}

    def of(kind: str) -> tuple[Path, Path]:
        if kind not in made:
            if kind == "sharded":
                made[kind] = (sharded(root / "small-sharded.zarr", (4, 4), [(1, 2)]),
                              sharded(root / "huge-sharded.zarr", (1000, 1000), SPARSE))
            else:
                codec: Compression = ZLIB if kind == "zlib" else ZSTD
                made[kind] = (write_twin(root / f"small-{kind}.zarr", (4, 4), CHUNK, compression=codec),
                              write_twin(root / f"huge-{kind}.zarr", (1000, 1000), CHUNK, stored=SPARSE,
                                         compression=codec))
        return made[kind]

    yield of


def walk(mount: MountFactory, source: Path, options: list[str], log: RequestLog,
         walker: str) -> tuple[int, float, Requests, int]:
    """(the storage size the walker found, its seconds, the store requests, the size of a chunk
    not stored in the index: the fill chunk's, or a decoded chunk's)."""
    mnt = mount(source, options, env=log.env)
    path = mnt.path / "data.h5"
    os.stat(path)
    log.take()
    started = time.monotonic()
    found = WALKERS[walker](path)
    seconds = time.monotonic() - started
    requests = log.take()
    with h5py.File(path, "r") as f:
        fill = f["data"].id.get_chunk_info_by_coord((16, 0)).size  # (chunk (1, 0): never stored)
    return found, seconds, requests, fill


@pytest.mark.parametrize("walker", list(WALKERS))
@pytest.mark.parametrize(("kind", "options"), [
    ("zlib", ["ro"]), ("zstd", ["ro"]), ("zstd", ["ro", "filters=plugins"]), ("sharded", ["ro"]),
], ids=["zlib-as-stored", "zstd-decoded", "zstd-as-stored", "sharded-zlib"])
def test_a_walk_of_a_sparse_giant_costs_what_its_stored_chunks_cost(
        twins: Callable[[str], tuple[Path, Path]], mount_array: MountFactory, tmp_path: Path, walker: str,
        kind: str, options: list[str]) -> None:
    small, huge = twins(kind)
    log = RequestLog(tmp_path / "requests.log")
    costs = {name: walk(mount_array, source, options, log, walker) for name, source in
             [("small", small), ("huge", huge)]}
    print(kind, options, walker, {name: (f"{c[1]:.2f} s", c[2].summary()) for name, c in costs.items()})
    small_size, small_seconds, small_requests, _ = costs["small"]
    size, seconds, requests, fill = costs["huge"]
    listings = len(requests.of_kind("list"))
    assert len(requests) <= 2 * len(small_requests) + listings, (requests.summary(), small_requests.summary())
    # (a listing of the rows' directory, then each row stored is looked at by each look of 8,192
    # chunks that spans it: a row of 1,000 chunks by one or two, a row of shards of 32 rows by
    # up to five; h5py walks twice; the index of each shard stored is read, once)
    walks, spans = (2 if walker == "h5py" else 1), (5 if kind == "sharded" else 2)
    indexes = len(SPARSE) if kind == "sharded" else 0
    assert requests.read() == indexes, requests.summary()
    assert listings <= walks * (1 + spans * len(SPARSE)), requests.summary()
    assert seconds <= 3 * small_seconds + SLACK, (seconds, small_seconds)
    chunks = 1000 * 1000
    if kind == "zstd" and "filters=plugins" not in options:  # (decoded: every chunk whole)
        assert size == chunks * 256 and small_size == 16 * 256 and fill == 256
        return
    count, nbytes = stored_inner_bytes(huge) if kind == "sharded" else stored_bytes(huge)
    assert count == len(SPARSE) and size == nbytes + (chunks - count) * fill, (size, nbytes, fill)


def test_a_dense_walk_asks_about_rows_not_chunks(tmp_path: Path, mount_array: MountFactory) -> None:
    """Every chunk of 200 x 200 stored: the walk learns their sizes by scanning their rows'
    directories, a few requests for the 40,000 chunks, and the storage size is their sum."""
    source = write_twin(tmp_path / "dense.zarr", (200, 200), CHUNK, compression=ZLIB)
    log = RequestLog(tmp_path / "requests.log")
    size, seconds, requests, _ = walk(mount_array, source, ["ro"], log, "h5ls")
    print("dense 200 x 200:", f"{seconds:.2f} s", requests.summary())
    count, nbytes = stored_bytes(source)
    assert count == 40_000 and size == nbytes
    assert len(requests) <= 8 and requests.read() == 0, requests.summary()


def stored_bytes(source: Path) -> tuple[int, int]:
    """(the chunks stored, their bytes) of a twin (a chunk file each)."""
    files = [p for p in (source / "c").rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def stored_inner_bytes(source: Path) -> tuple[int, int]:
    """(the inner chunks stored, their bytes) of a sharded array's shards, from each shard's
    index at its end: (offset, size) per inner chunk, 2^64 - 1 for none, then a crc32c."""
    count = nbytes = 0
    for shard in (p for p in (source / "c").rglob("*") if p.is_file()):
        entries = np.frombuffer(shard.read_bytes()[-(32 * 32 * 16 + 4):-4], "<u8").reshape(-1, 2)
        stored = entries[entries[:, 0] != np.uint64(2**64 - 1)]
        count, nbytes = count + len(stored), nbytes + int(stored[:, 1].sum())
    return count, nbytes
