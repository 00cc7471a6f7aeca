"""Pages pushed into the kernel's page cache ahead of a sequential reader (issue 81,
zarrfs.fuse.pages), through real mounts.

The kernel is the oracle of what it caches: `mincore(2)` on a mapping of the file says which
pages are in its page cache, whoever put them there. Pushed pages are the bytes the same file
serves without pushes (`-o push_pages=no`), for every flat view; a reader finds them without
asking (fewer requests); a write ahead of a streaming reader, through a chunk file, through
`data.npy` or from a second mount, is what that reader and every later opener read, never a
pushed page from before it; a file opened for writing is not pushed to; a daemon stopped with
pushes in flight leaves no process and no mount.
"""

from __future__ import annotations

import ctypes
import functools
import mmap
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr

from tests.helpers.mounting import Mount, MountFactory, is_mounted, wait_until
from tests.helpers.mounting import mount_stats as stats
from tests.helpers.processes import alive, children

CHUNK = (512, 512)
SHAPE = (4096, 4096)  # uint16: 8 KiB a row, 8 MiB a slab (two rows of chunks), 4 slabs
ROW = SHAPE[1] * 2
SLAB_ROWS = 1024
LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.mmap.restype = ctypes.c_void_p
LIBC.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                      ctypes.c_long]
LIBC.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
LIBC.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]


def picture(path: Path, **codecs: Any) -> np.ndarray[Any, Any]:
    rng = np.random.default_rng(81)
    values = (np.cumsum(rng.integers(-3, 4, SHAPE), axis=1) % 4000).astype("uint16")
    array = zarr.create_array(path, shape=SHAPE, chunks=CHUNK, dtype="uint16", fill_value=0, **codecs)
    array[...] = values
    return values


@pytest.fixture
def source(tmp_path: Path) -> Iterator[tuple[Path, np.ndarray[Any, Any]]]:
    """A fresh array for each test (the tests write)."""
    yield tmp_path / "a.zarr", picture(tmp_path / "a.zarr")


def cached_pages(fd: int) -> np.ndarray[Any, Any]:
    """Whether each page of the open file is in the kernel's page cache now (mincore of a
    mapping of it: mapping faults nothing in; no open of its own, which could drop pages)."""
    size = os.fstat(fd).st_size
    address = LIBC.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
    assert address != ctypes.c_void_p(-1).value, os.strerror(ctypes.get_errno())
    try:
        pages = -(-size // mmap.PAGESIZE)
        found = ctypes.create_string_buffer(pages)
        assert LIBC.mincore(address, size, found) == 0, os.strerror(ctypes.get_errno())
        return np.frombuffer(found.raw, np.uint8)[:pages] & 1 == 1
    finally:
        LIBC.munmap(address, size)


def read_in_order(path: Path, step: int = 1 << 20) -> bytes:
    with open(path, "rb", buffering=0) as f:
        return b"".join(iter(lambda: f.read(step), b""))


def start_streaming(f: Any, ahead: range) -> None:
    """Read the first 2 MiB of an open file as a sequential reader does, then wait until the
    kernel holds every page of `ahead` (rows of the array) that nobody asked for: pushed (all
    but the first page of each slab, which the reader asks for)."""
    for _ in range(8):
        f.read(256 << 10)
    pages = np.arange(ahead.start * ROW // mmap.PAGESIZE, ahead.stop * ROW // mmap.PAGESIZE)
    pushed = pages[pages % (SLAB_ROWS * ROW // mmap.PAGESIZE) != 0]
    wait_until(lambda: cached_pages(f.fileno())[pushed].all(), timeout=30,
               what=f"rows {ahead.start}-{ahead.stop} pushed into the page cache")


@pytest.mark.parametrize("name", ["data", "data.npy", "data.nii", "data.mrc", "data.fits"])
def test_every_flat_view_pushes_the_bytes_it_serves(source: tuple[Path, np.ndarray[Any, Any]],
                                                    mount_array: MountFactory, name: str) -> None:
    """A cold sequential read of each flat view: the bytes of a mount without pushes, the
    array's values where the view is `data`; the pages came pushed."""
    path, values = source
    pushing, replying = mount_array(path, ["ro"]), mount_array(path, ["ro", "push_pages=no"])
    pushed = read_in_order(pushing.path / name)
    assert pushed == read_in_order(replying.path / name)
    if name == "data":
        assert pushed == values.tobytes()
    assert stats(pushing)["bytes_pushed"] > 0
    assert stats(replying)["bytes_pushed"] == 0


def test_a_reader_finds_pushed_pages_without_asking(source: tuple[Path, np.ndarray[Any, Any]],
                                                    mount_array: MountFactory) -> None:
    """Slabs ahead of a reader are in the page cache before it reaches them; reading them
    costs the mount hardly a byte of replies; np.memmap reads them too."""
    path, values = source
    mount = mount_array(path, ["ro"])
    with open(mount.data, "rb", buffering=0) as f:
        start_streaming(f, range(1100, 3000))
        before = stats(mount)["bytes_replied"]
        f.seek(1100 * ROW)
        assert f.read(1024 * ROW) == values[1100:2124].tobytes()
        # Replied to, these 8 MiB would be 8 MiB of replies. Pushed, the first page of the
        # slab from row 2048 on, what the kernel asks around it, and the pages the machine
        # reclaimed meanwhile: pages pushed and not yet read look cold to a proactive reclaim
        # (here DAMON's pageout of unmapped pages), which drops a few, each a page to ask for
        # again (0-22 of the 2,048 seen; the count of requests asked was 4-13 so).
        assert stats(mount)["bytes_replied"] - before <= 1 << 20
    mapped = np.memmap(mount.data, dtype="<u2", mode="r", shape=SHAPE)
    assert int(mapped.sum(dtype=np.int64)) == int(values.sum(dtype=np.int64))
    del mapped


def test_readers_streaming_one_file_at_once_read_its_bytes(source: tuple[Path, np.ndarray[Any, Any]],
                                                           mount_array: MountFactory) -> None:
    """Three readers of `data` at once, at different speeds (their pushes land on each other's
    pages): each reads the array's bytes, three times."""
    path, values = source
    mount = mount_array(path, ["ro"])
    found: list[bytes] = []

    def stream(step: int) -> None:
        for _ in range(3):
            found.append(read_in_order(mount.data, step))

    readers = [threading.Thread(target=stream, args=(step,)) for step in (4096 * 3, 256 << 10, 1 << 20)]
    for reader in readers:
        reader.start()
    for reader in readers:
        reader.join(120)
    assert len(found) == 9 and all(each == values.tobytes() for each in found)
    assert stats(mount)["bytes_pushed"] > 0


def write_chunk_through(mount: Mount, second: Mount | None, how: str, rows: slice, value: int) -> None:
    """Write `value` into rows `rows` of columns 512-1023 (one chunk column), as `how` says:
    through the chunk file, or row by row through `data.npy`, `data` (opened for writing while
    the reader streams it) or a second mount's `data` (another writer: fsynced)."""
    block = np.full((rows.stop - rows.start, 512), value, "<u2")
    if how == "chunk file":
        assert rows.start % 512 == 0 and rows.stop - rows.start == 512
        with open(mount.chunk(f"c/{rows.start // 512}/1"), "r+b") as f:
            f.write(block.tobytes())
        return
    assert second is not None or how != "second mount"
    target = {"data.npy": mount.path / "data.npy", "data": mount.data}.get(how) or second.data  # type: ignore[union-attr]
    with open(target, "r+b") as f:
        header = 0
        if how == "data.npy":
            np.lib.format.read_magic(f)
            np.lib.format.read_array_header_1_0(f)
            header = f.tell()
        for i, row in enumerate(block):
            f.seek(header + (rows.start + i) * ROW + 512 * 2)
            f.write(row.tobytes())
        os.fsync(f.fileno())


@pytest.mark.parametrize("how", ["chunk file", "data.npy", "data", "second mount"])
def test_a_write_ahead_of_a_streaming_reader_is_what_it_reads(
        source: tuple[Path, np.ndarray[Any, Any]], mount_array: MountFactory, how: str) -> None:
    """Rows already pushed, then written: the reader going on through its open file reads the
    write (a second mount's: after its recheck), and so does a fresh open; rounds where the
    write lands while pushes are in flight too. A mount a round: a file opened for writing is
    pushed to no more (`data`, `data.npy`)."""
    path, values = source
    second = mount_array(path, []) if how == "second mount" else None
    expected = values.copy()
    for round_, (rows, wait) in enumerate([(slice(2048, 2560), True), (slice(3072, 3584), True),
                                           (slice(1536, 2048), False), (slice(3584, 4096), False)]):
        value = 50_000 + round_
        mount = mount_array(path, ["recheck=0.2"] if how == "second mount" else [])
        with open(mount.data, "rb", buffering=0) as f:
            if wait:
                start_streaming(f, range(rows.start, rows.stop))
            else:  # (the slabs still decoding, or being pushed)
                f.read(2 << 20)
            write_chunk_through(mount, second, how, rows, value)
            expected[rows, 512:1024] = value
            if how == "second mount":
                wait_until(functools.partial(shows, f, rows.start, value), timeout=30,
                           what="the second mount's write seen by the open file")
            f.seek(0)
            assert read_in_order_of(f) == expected.tobytes()
        assert read_in_order(mount.data) == expected.tobytes()
        assert read_in_order(mount.path / "data.npy")[128:] == expected.tobytes()
        assert stats(mount)["bytes_pushed"] > 0
        assert mount.unmount() == 0  # (written back: the next round's mount reads the store)


def read_in_order_of(f: Any, step: int = 1 << 20) -> bytes:
    return b"".join(iter(lambda: f.read(step), b""))


def shows(f: Any, row: int, value: int) -> bool:
    """Whether the open file shows `value` at column 512 of `row`."""
    f.seek(row * ROW + 512 * 2)
    return int(np.frombuffer(f.read(2), "<u2")[0]) == value


def test_a_file_opened_for_writing_is_never_pushed_to(source: tuple[Path, np.ndarray[Any, Any]],
                                                      mount_array: MountFactory) -> None:
    """Its pages may be dirty (a write in flight, a mapping written after close): a reader of
    it beside the writer is answered by requests alone, and reads the writer's bytes."""
    path, values = source
    mount = mount_array(path, [])
    with open(mount.data, "r+b") as writer:
        mapped = mmap.mmap(writer.fileno(), 0)
        mapped[3000 * ROW : 3000 * ROW + 2] = b"\xff\xff"
        before = stats(mount)["bytes_pushed"]
        expected = bytearray(values.tobytes())
        expected[3000 * ROW : 3000 * ROW + 2] = b"\xff\xff"
        assert read_in_order(mount.data) == bytes(expected)
        assert stats(mount)["bytes_pushed"] == before
        mapped.close()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL])
def test_a_daemon_stopped_while_pushing_leaves_nothing(source: tuple[Path, np.ndarray[Any, Any]],
                                                        mount_array: MountFactory, signum: int) -> None:
    """Readers streaming the file again and again, the daemon stopped: the readers end (their
    reads fail or finish, none hangs), and no process of the mount is left, nor the mount."""
    path, _ = source
    mount = mount_array(path, ["ro"])
    read_in_order(mount.data)  # (the decoding processes are forked)
    processes = [mount.process.pid, *children(mount.process.pid)]
    stop = threading.Event()

    def stream() -> None:
        while not stop.is_set():
            try:
                read_in_order(mount.data, 256 << 10)
            except OSError:
                return

    readers = [threading.Thread(target=stream) for _ in range(2)]
    for reader in readers:
        reader.start()
    try:
        wait_until(lambda: stats(mount)["bytes_pushed"] > 8 << 20, timeout=30, what="pushes")
        mount.process.send_signal(signum)
        mount.process.wait(60)
    finally:
        stop.set()
    for reader in readers:
        reader.join(60)
        assert not reader.is_alive()
    wait_until(lambda: not any(alive(pid) for pid in processes), timeout=30,
               what="the mount's processes' end")
    if signum == signal.SIGTERM:
        assert not is_mounted(mount.path)
