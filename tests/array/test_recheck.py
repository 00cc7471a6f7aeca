"""Other writers, seen through a mount: `-o recheck=open|SECONDS|never` (default `open`).

zarr-python and TensorStore write the store directly while it is mounted (a local directory,
and S3 through a local moto server). With `open` (close-to-open, as NFS promises) a file of
the array opened after the change shows it: `data`, `data.npy` and chunk files, new values
in existing chunks (also one inner chunk of a shard), a chunk deleted because it became all
fill, and a resize (st_size, the chunk listing and the metadata file follow). With SECONDS an
fd opened before the change sees it within about that time. With `never` the change is not
seen (caches are trusted until unmount), which is the contrast that shows the others work.

The mount-wide counters prove the cost: reopening an unchanged array reads no chunk again;
after another writer changed one chunk, that one chunk, and only it, is fetched and decoded
again. The mount's own writes are never taken for another writer's.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tensorstore as ts
import zarr

from tests.helpers.mounting import ZARRFS, Mount, is_mounted
from tests.helpers.s3_server import S3_ENV, S3Server, free_port, running

pytestmark = pytest.mark.skipif(
    not os.path.exists("/dev/fuse") or shutil.which("fusermount3") is None,
    reason="needs FUSE (/dev/fuse and fusermount3)",
)

SHAPE = (32, 32)
CHUNK = 8  # a 4 x 4 grid of chunks
DTYPE = "<u2"
ITEM = 2
VALUES = (np.arange(SHAPE[0] * SHAPE[1], dtype=DTYPE).reshape(SHAPE) * 3 + 1).astype(DTYPE)
DEADLINE = 6.0  # for recheck=2: what an open fd must see by then (2 s, generously)


# -- the store, local or S3 ------------------------------------------------------------------


@dataclass
class Backend:
    """Where the arrays live, and how the other writers and the mount reach them."""

    kind: str
    base: str  # a local directory, or s3://bucket/prefix
    server: S3Server | None = None
    prefix: str = ""  # in the bucket

    def url(self, name: str) -> str:
        return f"{self.base}/{name}"

    @property
    def mount_options(self) -> list[str]:
        return [] if self.server is None else [f"endpoint_url={self.server.endpoint_url}"]

    def _options(self) -> dict[str, Any]:
        return {} if self.server is None else {"storage_options": self.server.s3fs_options()}

    def create(self, name: str, *, shards: tuple[int, int] | None = None,
               values: np.ndarray = VALUES) -> zarr.Array:
        array = zarr.create_array(store=self.url(name), shape=values.shape, chunks=(CHUNK, CHUNK),
                                  shards=shards, dtype=DTYPE, fill_value=0, **self._options())
        array[...] = values
        return array

    def writer(self, name: str) -> zarr.Array:
        """zarr-python, opening the array afresh: another writer."""
        return zarr.open_array(self.url(name), mode="r+", **self._options())

    def tensorstore(self, name: str) -> Any:
        if self.server is None:
            kvstore: dict[str, Any] = {"driver": "file", "path": self.url(name)}
        else:
            kvstore = {"driver": "s3", "bucket": self.server.bucket, "path": f"{self.prefix}/{name}/",
                       "endpoint": self.server.endpoint_url, "aws_region": "us-east-1",
                       "aws_credentials": {"type": "environment"}}
        return ts.open({"driver": "zarr3", "kvstore": kvstore}, open=True).result()

    def stored_size(self, name: str, key: str) -> int:
        if self.server is None:
            return os.path.getsize(f"{self.url(name)}/{key}")
        import s3fs

        fs = s3fs.S3FileSystem(**self.server.s3fs_options())
        return int(fs.info(f"{self.server.bucket}/{self.prefix}/{name}/{key}")["size"])


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    """One moto server for the module (each test uses its own prefix)."""
    pytest.importorskip("moto.server")
    pytest.importorskip("s3fs")
    with pytest.MonkeyPatch.context() as patch:
        for name, value in S3_ENV.items():
            patch.setenv(name, value)
        with running(S3Server(free_port())) as server:
            yield server


@pytest.fixture(params=["local", "s3"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param == "local":
        return Backend("local", str(tmp_path / "store"))
    server: S3Server = request.getfixturevalue("s3")
    prefix = request.node.name.replace("[", "-").rstrip("]")
    return Backend("s3", f"s3://{server.bucket}/{prefix}", server, prefix)


@pytest.fixture
def local(tmp_path: Path) -> Backend:
    return Backend("local", str(tmp_path / "store"))


# -- reading the mount -----------------------------------------------------------------------


def read(path: Path) -> bytes:
    """A fresh open and a whole read (close-to-open: the open is what rechecks)."""
    with open(path, "rb", buffering=0) as f:
        return f.read()


def data(mount: Mount, shape: tuple[int, int] = SHAPE) -> np.ndarray:
    return np.frombuffer(read(mount.data), DTYPE).reshape(shape)


def chunk(mount: Mount, i: int, j: int) -> np.ndarray:
    return np.frombuffer(read(mount.chunk(f"c/{i}/{j}")), DTYPE).reshape(CHUNK, CHUNK)


def npy(mount: Mount) -> np.ndarray:
    return np.load(io.BytesIO(read(mount.path / "data.npy")))


def block(values: np.ndarray, i: int, j: int) -> np.ndarray:
    return values[i * CHUNK : (i + 1) * CHUNK, j * CHUNK : (j + 1) * CHUNK]


def stats(mount: Mount) -> dict[str, float]:
    result = subprocess.run([ZARRFS, "stats", str(mount.path), "--json"], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    counters: dict[str, float] = json.loads(result.stdout)
    return counters


def grown(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """How much each counter grew (figures that are not counters, as the user, left out)."""
    return {name: after[name] - before[name] for name in after if isinstance(after[name], int | float)}


def listing(mount: Mount, *parts: str) -> list[str]:
    return sorted(os.listdir(mount.path.joinpath("chunks", "c", *parts)), key=int)


def eventually(check: Callable[[], bool], deadline: float = DEADLINE) -> float | None:
    """Seconds until `check` held (polled every 0.1 s), or None if not within `deadline`."""
    began = time.monotonic()
    while True:
        if check():
            return time.monotonic() - began
        if time.monotonic() - began > deadline:
            return None
        time.sleep(0.1)


# -- 1. new values written by another writer -------------------------------------------------


def test_outside_writes_are_seen_after_reopen(backend: Backend, mount_array: Any) -> None:
    """zarr-python rewrites chunks the mount has read (the daemon caches them and `data` is in
    the page cache), one of them to all fill (so zarr-python deletes it): `data` reopened shows
    the new values, and so do the chunk files; a chunk file reopened first notices a change
    itself. Each change is counted once."""
    backend.create("a")
    mount = mount_array(backend.url("a"), backend.mount_options)
    assert np.array_equal(data(mount), VALUES)
    assert np.array_equal(data(mount), VALUES)  # reopened unchanged: from the caches
    assert np.array_equal(chunk(mount, 1, 2), block(VALUES, 1, 2))
    before = stats(mount)
    writer = backend.writer("a")
    expected = VALUES.copy()
    writer[8:16, 16:24] = expected[8:16, 16:24] = 7
    writer[24:32, 0:8] = expected[24:32, 0:8] = 0
    writer[16:24, 8:12] = expected[16:24, 8:12] = 65535
    assert np.array_equal(data(mount), expected)
    assert np.array_equal(chunk(mount, 1, 2), block(expected, 1, 2))
    assert np.array_equal(chunk(mount, 3, 0), block(expected, 3, 0))
    assert np.array_equal(chunk(mount, 2, 1), block(expected, 2, 1))

    # A chunk file reopened first notices the next change itself (one not read again since
    # the mount last looked at the whole array).
    writer[0:8, 0:8] = expected[0:8, 0:8] = 8
    assert np.array_equal(chunk(mount, 0, 0), block(expected, 0, 0))
    after = grown(before, stats(mount))
    assert after["chunks_changed_outside"] == 4, after  # each change noticed once
    assert after["errors"] == 0


def test_outside_write_is_seen_by_data_npy_reopened(backend: Backend, mount_array: Any) -> None:
    backend.create("h")
    mount = mount_array(backend.url("h"), backend.mount_options)
    assert np.array_equal(npy(mount), VALUES)
    assert np.array_equal(npy(mount), VALUES)
    expected = VALUES.copy()
    backend.writer("h")[0:8, 24:32] = expected[0:8, 24:32] = 11
    assert np.array_equal(npy(mount), expected)


@pytest.mark.fast
@pytest.mark.parametrize("noticer", ["chunk", "data.npy", "data"])
def test_a_change_noticed_through_one_file_shows_in_the_others(noticer: str, local: Backend,
                                                               mount_array: Any) -> None:
    """`data` and data.npy keep their pages in the kernel's page cache. When the open of
    another file of the array (a chunk file, or the other of the two) is what notices another
    writer's change, the one reopened next must not serve its old pages: its own recheck
    finds nothing new by then, the change having been taken already."""
    local.create("o")
    mount = mount_array(local.url("o"))
    readers = {"chunk": lambda: chunk(mount, 1, 2), "data.npy": lambda: block(npy(mount), 1, 2),
               "data": lambda: block(data(mount), 1, 2)}
    for read_it in [*readers.values(), *readers.values()]:  # cached, pages and all
        assert np.array_equal(read_it(), block(VALUES, 1, 2))
    local.writer("o")[8:16, 16:24] = 7
    assert np.array_equal(readers[noticer](), np.full((CHUNK, CHUNK), 7))
    stale = [name for name, read_it in readers.items()
             if not np.array_equal(read_it(), np.full((CHUNK, CHUNK), 7))]
    assert not stale, f"after {noticer} was reopened, {stale} reopened still show the old values"


def test_outside_writes_by_tensorstore_are_seen(backend: Backend, mount_array: Any) -> None:
    backend.create("t")
    mount = mount_array(backend.url("t"), backend.mount_options)
    assert np.array_equal(data(mount), VALUES)
    assert np.array_equal(chunk(mount, 3, 3), block(VALUES, 3, 3))
    before = stats(mount)
    expected = VALUES.copy()
    expected[20:30, 2:30] = 4242
    backend.tensorstore("t")[20:30, 2:30].write(expected[20:30, 2:30]).result()
    assert np.array_equal(data(mount), expected)
    assert np.array_equal(chunk(mount, 3, 3), block(expected, 3, 3))
    assert grown(before, stats(mount))["chunks_changed_outside"] == 8  # rows 2-3 of chunks


def test_tensorstore_writing_one_inner_chunk_of_a_shard_is_seen(backend: Backend,
                                                                 mount_array: Any) -> None:
    """Shards of 2 x 2 chunks (chunk files are shards): TensorStore rewrites one inner chunk,
    so one shard object changes."""
    backend.create("s", shards=(2 * CHUNK, 2 * CHUNK))
    mount = mount_array(backend.url("s"), backend.mount_options)
    assert np.array_equal(data(mount), VALUES)
    shard = np.frombuffer(read(mount.chunk("c/1/0")), DTYPE).reshape(16, 16)
    assert np.array_equal(shard, VALUES[16:32, 0:16])
    before = stats(mount)
    expected = VALUES.copy()
    expected[24:32, 8:16] = 999  # inner chunk (1, 1) of shard (1, 0)
    backend.tensorstore("s")[24:32, 8:16].write(expected[24:32, 8:16]).result()
    shard = np.frombuffer(read(mount.chunk("c/1/0")), DTYPE).reshape(16, 16)
    assert np.array_equal(shard, expected[16:32, 0:16])
    assert np.array_equal(data(mount), expected)
    assert np.array_equal(npy(mount), expected)
    assert grown(before, stats(mount))["chunks_changed_outside"] == 1


# -- 2. a resize by another writer -----------------------------------------------------------


def test_outside_resize_is_seen_after_reopen(backend: Backend, mount_array: Any) -> None:
    backend.create("r")
    mount = mount_array(backend.url("r"), backend.mount_options)
    assert np.array_equal(data(mount), VALUES)
    assert np.array_equal(data(mount), VALUES)
    assert listing(mount) == ["0", "1", "2", "3"]
    writer = backend.writer("r")
    writer.resize((48, 40))
    writer[32:48, :] = 3
    writer[:32, 32:40] = 5
    expected = np.zeros((48, 40), DTYPE)
    expected[:32, :32] = VALUES
    expected[32:48, :] = 3
    expected[:32, 32:40] = 5

    with open(mount.data, "rb", buffering=0) as f:  # the open takes the new shape
        assert os.fstat(f.fileno()).st_size == expected.nbytes
        assert np.array_equal(np.frombuffer(f.read(), DTYPE).reshape(48, 40), expected)
    assert os.stat(mount.data).st_size == expected.nbytes
    with open(mount.data, "rb", buffering=0) as f:  # past the old end
        assert os.pread(f.fileno(), 40 * ITEM, 40 * 40 * ITEM) == expected[40].tobytes()
    assert listing(mount) == ["0", "1", "2", "3", "4", "5"]
    assert listing(mount, "5") == ["0", "1", "2", "3", "4"]
    assert np.array_equal(chunk(mount, 5, 4), block(expected, 5, 4))
    assert np.array_equal(chunk(mount, 1, 4), block(expected, 1, 4))
    assert np.array_equal(npy(mount), expected)
    assert json.loads((mount.path / "zarr.json").read_text())["shape"] == [48, 40]


def test_outside_shrink_is_seen_after_reopen(local: Backend, mount_array: Any) -> None:
    local.create("r")
    mount = mount_array(local.url("r"))
    assert np.array_equal(data(mount), VALUES)
    assert np.array_equal(chunk(mount, 3, 3), block(VALUES, 3, 3))
    local.writer("r").resize((16, 32))
    assert np.array_equal(data(mount, (16, 32)), VALUES[:16])
    assert os.stat(mount.data).st_size == 16 * 32 * ITEM
    assert listing(mount) == ["0", "1"]
    assert not mount.chunk("c/3/3").exists()


def test_metadata_changed_beyond_the_shape_is_ignored_and_logged(local: Backend,
                                                                  mount_array: Any) -> None:
    """Attributes changed: nothing to see in the data. Shape and fill value changed: the old
    metadata is kept (remount to see it), with a warning, and the data still reads."""
    local.create("m")
    mount = mount_array(local.url("m"))
    assert np.array_equal(data(mount), VALUES)
    local.writer("m").attrs["note"] = "changed"
    assert np.array_equal(data(mount), VALUES)
    assert "remount" not in mount.log()
    path = Path(local.url("m")) / "zarr.json"
    document = json.loads(path.read_text())
    document["shape"] = [40, 32]
    document["fill_value"] = 9
    path.write_text(json.dumps(document))
    assert np.array_equal(data(mount), VALUES)
    assert os.stat(mount.data).st_size == VALUES.nbytes
    assert "remount to see it" in mount.log()


# -- 3. recheck=SECONDS: open files follow ---------------------------------------------------


def test_recheck_seconds_lets_open_files_follow(backend: Backend, mount_array: Any) -> None:
    backend.create("p")
    mount = mount_array(backend.url("p"), [*backend.mount_options, "recheck=2"])
    data_fd = os.open(mount.data, os.O_RDONLY)
    chunk_fd = os.open(mount.chunk("c/1/2"), os.O_RDONLY)
    try:
        assert os.pread(data_fd, VALUES.nbytes, 0) == VALUES.tobytes()
        assert os.pread(chunk_fd, CHUNK * CHUNK * ITEM, 0) == block(VALUES, 1, 2).tobytes()
        writer = backend.writer("p")
        expected = VALUES.copy()
        writer[8:16, 16:24] = expected[8:16, 16:24] = 7
        waited = eventually(lambda: (
            os.pread(data_fd, VALUES.nbytes, 0) == expected.tobytes()
            and os.pread(chunk_fd, CHUNK * CHUNK * ITEM, 0) == block(expected, 1, 2).tobytes()))
        assert waited is not None, "an fd opened before the change did not see it"

        writer.resize((40, 32))
        writer[32:40, :] = 21
        grown_values = np.concatenate([expected, np.full((8, 32), 21, DTYPE)])
        waited = eventually(lambda: (
            os.fstat(data_fd).st_size == grown_values.nbytes
            and os.pread(data_fd, grown_values.nbytes, 0) == grown_values.tobytes()))
        assert waited is not None, "an fd opened before the resize did not follow it"
    finally:
        os.close(data_fd)
        os.close(chunk_fd)


# -- 4. recheck=never: the contrast ----------------------------------------------------------


def test_recheck_never_trusts_the_caches(backend: Backend, mount_array: Any) -> None:
    backend.create("n")
    mount = mount_array(backend.url("n"), [*backend.mount_options, "recheck=never"])
    assert np.array_equal(data(mount), VALUES)
    assert np.array_equal(chunk(mount, 1, 2), block(VALUES, 1, 2))
    before = stats(mount)
    writer = backend.writer("n")
    writer[8:16, 16:24] = 7
    writer.resize((40, 32))
    assert np.array_equal(data(mount), VALUES)
    assert np.array_equal(chunk(mount, 1, 2), block(VALUES, 1, 2))
    assert os.stat(mount.data).st_size == VALUES.nbytes
    after = grown(before, stats(mount))
    assert after["rechecks"] == 0 and after["chunks_decoded"] == 0


# -- 5. the cost: nothing read again but what changed ----------------------------------------


def test_reopening_reads_again_only_the_chunk_that_changed(backend: Backend,
                                                           mount_array: Any) -> None:
    backend.create("c")
    mount = mount_array(backend.url("c"), backend.mount_options)
    assert np.array_equal(data(mount), VALUES)
    first = stats(mount)
    assert first["chunks_decoded"] == 16

    for _ in range(10):  # `data` (page cache) and a chunk file (read by the daemon each time)
        assert np.array_equal(data(mount), VALUES)
        assert np.array_equal(chunk(mount, 1, 2), block(VALUES, 1, 2))
    unchanged = stats(mount)
    delta = grown(first, unchanged)
    assert delta["rechecks"] >= 20
    assert delta["chunks_decoded"] == 0 and delta["bytes_fetched"] == 0, delta
    assert delta["chunks_changed_outside"] == 0

    expected = VALUES.copy()
    backend.writer("c")[8:16, 16:24] = expected[8:16, 16:24] = 7
    assert np.array_equal(data(mount), expected)
    for i in range(4):
        for j in range(4):
            assert np.array_equal(chunk(mount, i, j), block(expected, i, j))
    changed = stats(mount)
    delta = grown(unchanged, changed)
    assert delta["chunks_changed_outside"] == 1, delta
    assert delta["chunks_decoded"] == 1, delta
    assert delta["bytes_fetched"] == backend.stored_size("c", "c/1/2"), delta

    for _ in range(5):
        assert np.array_equal(data(mount), expected)
    delta = grown(changed, stats(mount))
    assert delta["chunks_decoded"] == 0 and delta["chunks_changed_outside"] == 0, delta


# -- 6. the mount's own writes ---------------------------------------------------------------


def test_own_writes_are_not_taken_for_outside_changes(backend: Backend, mount_array: Any) -> None:
    backend.create("w")
    mount = mount_array(backend.url("w"), backend.mount_options)
    assert np.array_equal(data(mount), VALUES)
    before = stats(mount)
    expected = VALUES.copy()
    expected[3] = np.arange(100, 132, dtype=DTYPE)
    with open(mount.data, "r+b", buffering=0) as f:
        f.seek(3 * SHAPE[1] * ITEM)
        f.write(expected[3].tobytes())
        os.fsync(f.fileno())
    assert np.array_equal(backend.writer("w")[...], expected)  # stored
    expected[20:24, 10:14] = 5  # and one not yet written back when reopened
    with open(mount.chunk("c/2/1"), "r+b", buffering=0) as f:
        block_values = block(expected, 2, 1)
        f.write(block_values.tobytes())
    for _ in range(3):
        assert np.array_equal(data(mount), expected)
        assert np.array_equal(npy(mount), expected)
        assert np.array_equal(chunk(mount, 0, 1), block(expected, 0, 1))
        assert np.array_equal(chunk(mount, 2, 1), block(expected, 2, 1))
    delta = grown(before, stats(mount))
    assert delta["chunks_changed_outside"] == 0, delta
    assert delta["chunks_decoded"] == 0, delta  # what it wrote stays cached
    assert delta["rechecks"] >= 12 and delta["write_conflicts"] == 0
    assert mount.unmount() == 0
    assert np.array_equal(backend.writer("w")[...], expected)


# -- 7. bad values ---------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["recheck=0", "recheck=-1", "recheck=soon", "recheck=nan",
                                   "recheck=", "recheck"])
def test_bad_recheck_values_fail_the_mount(value: str, local: Backend, tmp_path: Path) -> None:
    local.create("b")
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    process = subprocess.Popen([ZARRFS, "mount", "-f", local.url("b"), str(mountpoint), "-o", value],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _, error = process.communicate(timeout=20)
    except subprocess.TimeoutExpired:  # it mounted: undo that, then fail
        subprocess.run(["fusermount3", "-u", "-z", str(mountpoint)], capture_output=True)
        process.communicate(timeout=30)
        pytest.fail(f"-o {value} mounted")
    assert process.returncode != 0
    assert "recheck" in error, error
    assert not is_mounted(mountpoint)
