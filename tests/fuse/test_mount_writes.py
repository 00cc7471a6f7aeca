"""The filesystem on a real FUSE mount, written with ordinary tools (pwrite, dd, mmap, numpy):
writes reach the store and the other files, close returns once they are stored, chunk files
keep their size and refuse shared maps, and what a mount refuses to write."""

from __future__ import annotations

import errno
import json
import mmap
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr

from tests.helpers.fuse_arrays import DTYPE, SHAPE, reference_values, tensorstore_read

# -- writes -----------------------------------------------------------------------------------


def test_pwrite_dd_mmap_and_chunk_writes_reach_the_store(array_path: Path, mount_array: Any) -> None:
    model = reference_values().copy()
    flat = model.reshape(-1).view(np.uint8)
    mount = mount_array(array_path)
    fd = os.open(mount.data, os.O_RDWR)
    try:
        # Unaligned pwrite, crossing element, chunk and shard boundaries.
        patch = bytes(range(7, 250, 3)) * 9
        os.pwrite(fd, patch, 1001)
        flat[1001 : 1001 + len(patch)] = np.frombuffer(patch, np.uint8)
        # A shared mapping, written and synced.
        with mmap.mmap(fd, 0) as mapped:
            mapped[5000:5010] = b"\xab" * 10
            mapped.flush()
        flat[5000:5010] = 0xAB
    finally:
        os.close(fd)
    # dd with conv=notrunc, as the README shows.
    source = array_path.parent / "patch.bin"
    source.write_bytes(b"\x11\x22" * 700)
    subprocess.run(["dd", f"if={source}", f"of={mount.data}", "bs=700", "seek=3", "conv=notrunc",
                    "status=none"], check=True)
    flat[2100:3500] = np.frombuffer(b"\x11\x22" * 700, np.uint8)
    # A chunk file: the whole of chunk (1, 1).
    block = np.full((20, 35), 4242, dtype=DTYPE)
    with open(mount.chunk("c/1/1"), "r+b") as f:
        f.write(block.tobytes())
    model[20:40, 35:70] = block
    assert mount.data.read_bytes() == model.tobytes()
    assert mount.unmount() == 0
    assert np.array_equal(tensorstore_read(array_path), model)
    assert np.array_equal(zarr.open_array(str(array_path), mode="r")[...], model)


def test_writes_are_seen_through_the_other_files(array_path: Path, mount_array: Any) -> None:
    mount = mount_array(array_path)
    chunk_path = mount.chunk("c/0/1")
    before = chunk_path.read_bytes()  # now in the page cache
    data_before = mount.data.read_bytes()
    with open(mount.data, "r+b") as f:
        f.seek((3 * 70 + 40) * 2)
        f.write(np.array([777], DTYPE).tobytes())
    after = np.frombuffer(chunk_path.read_bytes(), DTYPE).reshape(20, 35)
    assert after[3, 5] == 777 and before != after.tobytes()
    with open(chunk_path, "r+b") as f:
        f.seek((4 * 35 + 6) * 2)
        f.write(np.array([888], DTYPE).tobytes())
    data_after = np.frombuffer(mount.data.read_bytes(), DTYPE).reshape(SHAPE)
    assert data_after[4, 41] == 888 and data_after.tobytes() != data_before


def test_a_write_only_writer_is_seen_by_readers_holding_the_file_open(
        array_path: Path, mount_array: Any) -> None:
    """dd, cp and tofile open `data` write-only, and their writes skip the page cache (one
    copy fewer): the pages other openers cached are dropped, so that a mapping shows the
    write once it is answered, and read() at once."""
    mount = mount_array(array_path)
    page = mmap.PAGESIZE
    new = [bytes([value]) * page for value in (0x5A, 0xA5)]
    writer = os.open(mount.data, os.O_WRONLY)
    reader = os.open(mount.data, os.O_RDONLY)
    try:
        old = os.pread(reader, 2 * page, 0)
        with mmap.mmap(reader, 0, prot=mmap.PROT_READ) as mapped:
            assert mapped[: 2 * page] == old  # cached after the writer's open, and mapped
            os.pwrite(writer, new[1], page)
            deadline = time.monotonic() + 10
            while mapped[page : 2 * page] != new[1] and time.monotonic() < deadline:
                time.sleep(0.01)
            assert mapped[page : 2 * page] == new[1], "the mapping kept the page from before the write"
        os.pread(reader, page, 0)  # cached again
        os.pwrite(writer, new[0], 0)
        assert os.pread(reader, 2 * page, 0) == new[0] + new[1]
    finally:
        os.close(reader)
        os.close(writer)
    assert mount.unmount() == 0
    assert tensorstore_read(array_path).tobytes()[: 2 * page] == new[0] + new[1]


def test_close_returns_after_the_data_is_stored(array_path: Path, mount_array: Any) -> None:
    mount = mount_array(array_path)
    with open(mount.data, "r+b") as f:
        f.write(b"\x01\x02" * 50)
    # Still mounted: TensorStore reads the store directly.
    assert tensorstore_read(array_path).reshape(-1)[:50].tolist() == [0x0201] * 50
    fd = os.open(mount.data, os.O_WRONLY)
    try:
        os.pwrite(fd, b"\x03\x04", 200)
        os.fsync(fd)
        assert tensorstore_read(array_path).reshape(-1)[100] == 0x0403
    finally:
        os.close(fd)


def test_a_chunk_overwritten_with_the_fill_value_is_deleted(array_path: Path, mount_array: Any) -> None:
    mount = mount_array(array_path)
    with open(mount.chunk("c/2/1"), "r+b") as f:
        f.write(bytes(20 * 35 * 2))
    mount.unmount()
    assert not (array_path / "c" / "2" / "1").exists()
    assert (array_path / "c" / "2" / "0").exists()


def test_chunk_files_have_a_fixed_size(array_path: Path, mount_array: Any) -> None:
    """Chunk files keep their size; `data` changes only by whole rows (see test_resize_refused.py)."""
    mount = mount_array(array_path)
    chunk = next(p for p in (mount.path / "chunks").rglob("*") if p.is_file())
    size = chunk.stat().st_size
    fd = os.open(chunk, os.O_RDWR)
    try:
        with pytest.raises(OSError) as past_end:
            os.pwrite(fd, b"x", size)
        assert past_end.value.errno == errno.EFBIG
        assert os.pwrite(fd, b"abcd", size - 2) == 2  # a short write up to the end
        os.truncate(chunk, size)  # the current size: fine, nothing changes
        with pytest.raises(OSError) as resize:
            os.truncate(chunk, size // 2)
        assert resize.value.errno == errno.EPERM
        data_size = mount.data.stat().st_size
        with pytest.raises(OSError) as partial_row:
            os.truncate(mount.data, data_size - 1)
        assert partial_row.value.errno == errno.EINVAL
    finally:
        os.close(fd)
    assert "refused to change the size" in mount.log()
    assert chunk.stat().st_size == size
    assert mount.data.stat().st_size == data_size


def test_read_only_mount_refuses_writes_with_erofs(array_path: Path, mount_array: Any) -> None:
    mount = mount_array(array_path, ["ro"])
    with pytest.raises(OSError) as opened:
        os.open(mount.data, os.O_RDWR)
    assert opened.value.errno == errno.EROFS
    with pytest.raises(OSError) as created:
        (mount.path / "chunks" / "new").write_bytes(b"x")
    assert created.value.errno == errno.EROFS
    assert mount.data.read_bytes() == reference_values().tobytes()


def test_zarr_json_cannot_be_written(array_path: Path, mount_array: Any) -> None:
    mount = mount_array(array_path)
    with pytest.raises(PermissionError):
        os.open(mount.path / "zarr.json", os.O_RDWR)


def test_open_with_o_trunc_empties_data_and_is_refused_for_chunk_files(
    array_path: Path, mount_array: Any
) -> None:
    """O_TRUNC is a size change: `data` to zero rows (shape[0] = 0), a chunk file never."""
    mount = mount_array(array_path)
    chunk = next(p for p in (mount.path / "chunks").rglob("*") if p.is_file())
    with pytest.raises(OSError) as truncated:
        os.open(chunk, os.O_WRONLY | os.O_TRUNC)
    assert truncated.value.errno == errno.EPERM
    assert "refused to change the size" in mount.log()
    assert mount.data.read_bytes() == reference_values().tobytes()
    os.close(os.open(mount.data, os.O_WRONLY | os.O_TRUNC))
    assert mount.data.stat().st_size == 0
    assert json.loads((mount.path / "zarr.json").read_bytes())["shape"] == [0, 70]
    assert mount.unmount() == 0
    assert json.loads((array_path / "zarr.json").read_bytes())["shape"] == [0, 70]


def test_chunk_files_are_read_fresh_and_refuse_shared_maps(array_path: Path, mount_array: Any) -> None:
    """Chunk files are direct_io: always current, and (libfuse 3.14) not mappable shared."""
    mount = mount_array(array_path)
    with open(mount.chunk("c/2/1"), "r+b") as chunk:
        chunk.seek(19 * 35 * 2)
        chunk.write(np.array([1234], DTYPE).tobytes())
        # An edge chunk's overhang lies outside the array; what is written there is dropped.
        with open(mount.data, "r+b") as data:
            data.seek((59 * 70 + 69) * 2)
            data.write(np.array([4321], DTYPE).tobytes())
        chunk.seek(0)
        current = np.frombuffer(chunk.read(), DTYPE).reshape(20, 35)
        assert current[19, 0] == 1234 and current[19, 34] == 4321
        with pytest.raises(OSError) as shared:
            mmap.mmap(chunk.fileno(), 0)
        assert shared.value.errno == errno.ENODEV
