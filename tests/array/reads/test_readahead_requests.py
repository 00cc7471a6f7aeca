"""Read-ahead priced in store requests on a remote store (issue 58; a moto S3 server here): a
cold small read of `data` of an array of small chunks costs about what its bytes touch, by
whichever way it is read (`pread`, Python's buffered `read`, `mmap`), and a reader in order
still streams each chunk once. Counted with the daemon's request log, never timed. Before: the
kernel's 1 MiB window and Python's 1 MiB buffer (`st_blksize`) made a 16 KiB read of a 1024 x
1024 array in 16 x 16 chunks cost every one of its 4,096 chunks, and 1 KiB of a 10^12-element
canvas 31,250 lookups. A local store's request is priced as a local read (issue 71: page
faults of `np.memmap` were served 8 KiB at a time, as on S3)."""

from __future__ import annotations

import mmap
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import zarr

from tests.helpers.mounting import Mount, MountFactory, pread
from tests.helpers.s3_server import S3_ENV
from tests.helpers.scale_arrays import RequestLog, chunks_touched, twin_on_s3, values, write_twin
from tests.helpers.slow_s3 import SlowS3, slow_s3

GRID, CHUNK = (64, 64), (16, 16)
SHAPE = (GRID[0] * CHUNK[0], GRID[1] * CHUNK[1])
GIANT_SHAPE, GIANT_CHUNK = (1_000_000, 1_000_000), (32, 32)
GIANT_STORED = [(0, 0), (15_625, 15_625), (31_249, 31_249)]
FEW = 4  # requests besides the chunks: the array's metadata at the open
KIB, PAGE = 1 << 10, 4096

Reader = Callable[[Path, int, int], bytes]


def buffered(path: Path, offset: int, size: int) -> bytes:
    with open(path, "rb") as f:  # (Python's buffer: st_blksize)
        f.seek(offset)
        return f.read(size)


def mapped(path: Path, offset: int, size: int) -> bytes:
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        return bytes(m[offset : offset + size])


READERS: dict[str, Reader] = {"pread": lambda path, offset, size: pread(path, size, offset),
                              "buffered": buffered, "mmap": mapped}


@pytest.fixture(scope="module")
def s3() -> Iterator[SlowS3]:
    """A moto server in a child process (an `mmap` reader's page fault holds this process's
    GIL while the daemon asks the server), no delay."""
    with pytest.MonkeyPatch.context() as patch, slow_s3(0) as server:
        for name, value in S3_ENV.items():
            patch.setenv(name, value)
        yield server


@pytest.fixture(scope="module")
def twin(s3: SlowS3, tmp_path_factory: pytest.TempPathFactory) -> str:
    return twin_on_s3(s3, tmp_path_factory.mktemp("readahead"), GRID, CHUNK)


@pytest.fixture(scope="module")
def giant(s3: SlowS3, tmp_path_factory: pytest.TempPathFactory) -> str:
    grid = (GIANT_SHAPE[0] // GIANT_CHUNK[0], GIANT_SHAPE[1] // GIANT_CHUNK[1])
    return twin_on_s3(s3, tmp_path_factory.mktemp("readahead"), grid, GIANT_CHUNK, name="giant.zarr",
                      stored=GIANT_STORED, shape=GIANT_SHAPE)


@pytest.fixture
def counted(s3: SlowS3, tmp_path: Path,
            mount_array: MountFactory) -> Iterator[tuple[RequestLog, Callable[..., Mount]]]:
    log = RequestLog(tmp_path / "requests.log")

    def mount(source: str | Path, options: tuple[str, ...] = ()) -> Mount:
        remote = (f"endpoint_url={s3.server}",) if str(source).startswith("s3://") else ()
        mounted = mount_array(source, (*remote, *options), env=log.env)
        mounted.wait_for_log("mounted ")  # (the kernel's window is set then: a file opened keeps it)
        return mounted

    yield log, mount


def kernel_window_kb(mount: Mount) -> int:
    """The mount's readahead, as the kernel has it."""
    with open("/proc/self/mountinfo") as f:
        device = [line.split()[2] for line in f if line.split()[4] == str(mount.path)][-1]
    return int(Path(f"/sys/class/bdi/{device}/read_ahead_kb").read_text())


@pytest.mark.parametrize("reader", list(READERS))
def test_a_cold_small_read_of_small_chunks_costs_twice_what_it_touches_at_most(
        twin: str, counted: tuple[RequestLog, Callable[..., Mount]], reader: str) -> None:
    """16 KiB in the middle of `data`: TensorStore reads the row of chunks its 9 rows lie in
    (64 chunks); the kernel reads whole pages, and a window around them."""
    log, mount = counted
    mnt = mount(twin)
    offset, size = SHAPE[0] // 2 * SHAPE[1] + SHAPE[1] // 2, 16 * KIB
    log.take()
    data = READERS[reader](mnt.data, offset, size)
    requests = log.take()
    first = offset // SHAPE[1]
    flat = values((first, 0), (first + size // SHAPE[1] + 2, SHAPE[1])).tobytes()
    assert data == flat[offset % SHAPE[1] : offset % SHAPE[1] + size]
    touched = chunks_touched(SHAPE, CHUNK, offset, size)
    assert requests.listed() == 0, requests.summary()
    assert requests.read() <= 2 * touched and requests.count() <= 2 * touched + FEW, requests.summary()


@pytest.mark.parametrize("reader", list(READERS))
def test_a_kilobyte_of_a_sparse_canvas_looks_up_a_few_pages_of_chunks(
        giant: str, counted: tuple[RequestLog, Callable[..., Mount]], reader: str) -> None:
    """1 KiB across the middle stored chunk's first row: 32 chunks, one stored. A page is 128
    chunks of a row; what is looked up stays within a few pages (31,250 before: a row of the
    canvas is a whole row of chunks, and 1 MiB was read for 1 KiB)."""
    log, mount = counted
    mnt = mount(giant)
    i, j = GIANT_STORED[1]
    row, column = i * GIANT_CHUNK[0], j * GIANT_CHUNK[1] - 512
    offset = row * GIANT_SHAPE[1] + column
    log.take()
    data = READERS[reader](mnt.data, offset, KIB)
    requests = log.take()
    expected = bytearray(KIB)
    start = column + 512
    expected[512 : 512 + GIANT_CHUNK[1]] = values((row, start), (row + 1, start + GIANT_CHUNK[1])).tobytes()
    assert data == expected
    page_chunks = PAGE // GIANT_CHUNK[1]
    assert requests.listed() == 0 and requests.count() <= 4 * page_chunks + FEW, requests.summary()


def test_the_kernel_window_is_what_the_chunks_afford_or_what_was_asked(
        s3: SlowS3, twin: str, tmp_path: Path, counted: tuple[RequestLog, Callable[..., Mount]]) -> None:
    big = twin_on_s3(s3, tmp_path, (2, 2), (512, 512), name="big.zarr")
    _, mount = counted
    assert kernel_window_kb(mount(twin)) == 8
    assert kernel_window_kb(mount(big)) == 1024
    assert kernel_window_kb(mount(twin, ("readahead=512",))) == 512
    assert os.stat(mount(twin).data).st_blksize == 8 * KIB  # (Python's buffer: a window, not 1 MiB)


def test_a_local_store_prices_a_request_as_a_local_read(
        tmp_path: Path, counted: tuple[RequestLog, Callable[..., Mount]]) -> None:
    """A local store's request is a read of a file and a decode, not a round trip: its windows
    may cost LOCAL_FREE_REQUESTS. An `mmap` reader of 32 x 32 float32 chunks is served 1 MiB
    at a time (8 KiB on S3, page fault by page fault); 16 x 16 uint8 chunks still get a small
    window (64 KiB: a 1 MiB one would decode 4,096 chunks for a page); `-o readahead=` wins."""
    floats = tmp_path / "floats.zarr"
    zarr.create_array(floats, shape=(4096, 4096), chunks=(32, 32), dtype="float32", fill_value=0)
    local = write_twin(tmp_path / "local.zarr", GRID, CHUNK)
    _, mount = counted
    mnt = mount(floats)
    assert kernel_window_kb(mnt) == 1024 and os.stat(mnt.data).st_blksize == 1024 * KIB
    assert kernel_window_kb(mount(local)) == 64 and os.stat(mount(local).data).st_blksize == 64 * KIB
    assert kernel_window_kb(mount(local, ("readahead=512",))) == 512
