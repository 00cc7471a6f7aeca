"""`store.page_cache` and the reads that must not wait on a disk (`LocalFiles.read_cached`), on
real files whose pages are dropped from the page cache by hand."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from zarrfs.store import Store
from zarrfs.store.local import page_cache

pytestmark = pytest.mark.fast

SIZE = 4 << 20
HALF = SIZE // 2  # (a page cache folio is at most 2 MiB, aligned: none holds bytes of both halves)


@pytest.fixture
def written(tmp_path: Path) -> Iterator[tuple[Path, int, bytes]]:
    """A file of SIZE bytes, written back to disk (its pages clean: they can be dropped), open."""
    path, data = tmp_path / "k", os.urandom(SIZE)
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    fd = os.open(path, os.O_RDONLY)
    yield path, fd, data
    os.close(fd)


def test_cached_says_which_bytes_are_in_memory(written: tuple[Path, int, bytes]) -> None:
    _, fd, _ = written
    assert page_cache.cached(fd, 100, SIZE - 100)
    assert page_cache.cached(fd, 5, 0)
    assert not page_cache.cached(fd, SIZE - 10, 8192)  # (past the end: no page)
    os.posix_fadvise(fd, HALF, 0, os.POSIX_FADV_DONTNEED)
    assert page_cache.cached(fd, 0, HALF)
    assert not page_cache.cached(fd, HALF - 10, 20)
    assert not page_cache.cached(fd, SIZE - 1, 1)


def test_read_cached_reads_bytes_in_memory(written: tuple[Path, int, bytes]) -> None:
    """(Whether it refuses bytes on disk is `cached`'s to say, tested above: a refused read
    starts the kernel's readahead of them, so they may be in memory a moment later.)"""
    path, _, data = written
    store = Store.open(str(path.parent))
    files = store.local_files
    assert files is not None
    for start, length in ((0, HALF), (HALF - 100, 200), (SIZE - 5000, 5000)):
        into = bytearray(length)
        assert files.read_cached("k", start, memoryview(into)) == store.stat("k")[1]  # type: ignore[index]
        assert bytes(into) == data[start : start + length]
    assert files.read_cached("k", SIZE - 10, memoryview(bytearray(20))) is None  # (past the end)
    assert files.read_cached("missing", 0, memoryview(bytearray(20))) is None


def test_no_read_where_the_filesystem_cannot_promise_no_wait() -> None:
    """tmpfs has no RWF_NOWAIT, as network filesystems have none: their cached bytes are not
    read by a read that may wait (on NFS, for the server's attributes); a worker reads them."""
    with tempfile.TemporaryDirectory(dir="/dev/shm") as directory:
        (Path(directory) / "k").write_bytes(b"x" * 4096)
        fd = os.open(Path(directory) / "k", os.O_RDONLY)
        try:
            with pytest.raises(OSError):
                os.preadv(fd, [bytearray(10)], 0, os.RWF_NOWAIT)
            assert page_cache.cached(fd, 0, 4096)
        finally:
            os.close(fd)
        files = Store.open(directory).local_files
        assert files is not None and files.read_cached("k", 0, memoryview(bytearray(10))) is None
