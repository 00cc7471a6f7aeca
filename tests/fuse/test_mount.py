"""The filesystem on a real FUSE mount, used with ordinary tools: ls, dd, cat, mmap, numpy."""

from __future__ import annotations

import errno
import json
import mmap
import os
import random
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tensorstore as ts
import zarr

from tests.helpers.mounting import ZARRFS, is_mounted, mounted, without_views

SHAPE = (60, 70)
DTYPE = np.dtype("<u2")


def _create(path: Path, *, shards: bool = True, fill: int = 0, codec: str = "zstd:1",
            separator: str = "/") -> None:
    args = [ZARRFS, "create", str(path), "--shape", "60,70", "--dtype", "uint16",
            "--codec", codec, "--fill-value", str(fill), "--key-separator", separator]
    args += ["--chunks", "5,7", "--shards", "20,35"] if shards else ["--chunks", "20,35"]
    subprocess.run(args, check=True, capture_output=True)


def _tensorstore_read(path: Path) -> np.ndarray:
    spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path)}}
    return np.asarray(ts.open(spec).result().read().result())


def _reference() -> np.ndarray:
    return (np.arange(np.prod(SHAPE), dtype=np.uint64) * 7919 % 65521).astype(DTYPE).reshape(SHAPE)


@pytest.fixture(params=["sharded", "plain"])
def array_path(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """A 60x70 uint16 array holding _reference(), written by TensorStore."""
    path = tmp_path / "array.zarr"
    _create(path, shards=request.param == "sharded")
    spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path)}}
    ts.open(spec).result().write(_reference()).result()
    return path


# -- layout and names -------------------------------------------------------------------------


def test_layout_lists_metadata_data_and_every_chunk(array_path: Path, mount_array: Any) -> None:
    mount = mount_array(array_path)
    assert without_views(os.listdir(mount.path)) == ["chunks", "data", "zarr.json"]
    assert json.loads((mount.path / "zarr.json").read_bytes()) == json.loads(
        (array_path / "zarr.json").read_bytes())
    assert mount.data.stat().st_size == np.prod(SHAPE) * 2
    listed = sorted(os.listdir(mount.path / "chunks" / "c"))
    assert listed == ["0", "1", "2"]
    assert sorted(os.listdir(mount.path / "chunks" / "c" / "2")) == ["0", "1"]
    assert (mount.chunk("c/2/1")).stat().st_size == 20 * 35 * 2


@pytest.mark.parametrize("name", ["c/3/0", "c/0/2", "c/0/0/0", "c/00/1", "c/-1/0", "x", "c/+1/0",
                                  "c/0/1x", "..", "c/../data"])
def test_names_outside_the_grid_do_not_exist(array_path: Path, mount_array: Any, name: str) -> None:
    mount = mount_array(array_path)
    path = mount.path / "chunks" / name
    if name in ("..", "c/../data"):
        # The kernel resolves "..": it must land back inside the mount, never outside.
        # (is_relative_to, not a string prefix, which a sibling such as "mnt2" would also match)
        assert Path(os.path.realpath(path)).is_relative_to(os.path.realpath(mount.path))
        return
    with pytest.raises((FileNotFoundError, NotADirectoryError)):
        path.stat()


def test_dot_separated_keys_are_flat_files(tmp_path: Path, mount_array: Any) -> None:
    path = tmp_path / "dots.zarr"
    _create(path, shards=False, separator=".")
    mount = mount_array(path)
    assert sorted(os.listdir(mount.path / "chunks")) == [
        f"c.{i}.{j}" for i in range(3) for j in range(2)]
    assert mount.chunk("c.1.1").stat().st_size == 20 * 35 * 2


# -- reads ------------------------------------------------------------------------------------


def test_whole_file_random_preads_and_mmap_match_tensorstore(array_path: Path, mount_array: Any) -> None:
    expected = _tensorstore_read(array_path).tobytes()
    mount = mount_array(array_path)
    assert mount.data.read_bytes() == expected
    rng = random.Random(1)
    fd = os.open(mount.data, os.O_RDONLY)
    try:
        for _ in range(300):
            offset = rng.randrange(len(expected))
            size = rng.randrange(1, 9000)
            assert os.pread(fd, size, offset) == expected[offset : offset + size]
        assert os.pread(fd, 100, len(expected)) == b""
        with mmap.mmap(fd, 0, prot=mmap.PROT_READ) as mapped:
            assert mapped[:] == expected
    finally:
        os.close(fd)
    memmap = np.memmap(mount.data, dtype=DTYPE, mode="r", shape=SHAPE)
    assert np.array_equal(memmap, _reference())


@pytest.mark.fast
def test_chunk_files_hold_the_decoded_chunk(array_path: Path, mount_array: Any) -> None:
    mount = mount_array(array_path)
    reference = _reference()
    for i in range(3):
        for j in range(2):
            chunk = np.fromfile(mount.chunk(f"c/{i}/{j}"), dtype=DTYPE).reshape(20, 35)
            assert np.array_equal(chunk, reference[i * 20 : (i + 1) * 20, j * 35 : (j + 1) * 35])


@pytest.mark.fast
def test_dd_reads_bytes(array_path: Path, mount_array: Any) -> None:
    mount = mount_array(array_path)
    result = subprocess.run(["dd", f"if={mount.data}", "bs=1000", "skip=3", "count=2", "status=none"],
                            capture_output=True, check=True)
    assert result.stdout == _reference().tobytes()[3000:5000]


def test_big_endian_view(array_path: Path, mount_array: Any) -> None:
    mount = mount_array(array_path, ["endian=big"])
    assert np.array_equal(np.fromfile(mount.data, dtype=">u2").reshape(SHAPE), _reference())
    with open(mount.data, "r+b") as f:
        f.seek(2 * 5)
        f.write(np.array([0x1234], dtype=">u2").tobytes())
    mount.unmount()
    assert _tensorstore_read(array_path)[0, 5] == 0x1234


# -- writes -----------------------------------------------------------------------------------


def test_pwrite_dd_mmap_and_chunk_writes_reach_the_store(array_path: Path, mount_array: Any) -> None:
    model = _reference().copy()
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
    assert np.array_equal(_tensorstore_read(array_path), model)
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
    assert _tensorstore_read(array_path).tobytes()[: 2 * page] == new[0] + new[1]


def test_close_returns_after_the_data_is_stored(array_path: Path, mount_array: Any) -> None:
    mount = mount_array(array_path)
    with open(mount.data, "r+b") as f:
        f.write(b"\x01\x02" * 50)
    # Still mounted: TensorStore reads the store directly.
    assert _tensorstore_read(array_path).reshape(-1)[:50].tolist() == [0x0201] * 50
    fd = os.open(mount.data, os.O_WRONLY)
    try:
        os.pwrite(fd, b"\x03\x04", 200)
        os.fsync(fd)
        assert _tensorstore_read(array_path).reshape(-1)[100] == 0x0403
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
    """Chunk files keep their size; `data` changes only by whole rows (see test_resize.py)."""
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
    assert mount.data.read_bytes() == _reference().tobytes()


def test_zarr_json_cannot_be_written(array_path: Path, mount_array: Any) -> None:
    mount = mount_array(array_path)
    with pytest.raises(PermissionError):
        os.open(mount.path / "zarr.json", os.O_RDWR)


# -- the daemon -------------------------------------------------------------------------------


def test_background_mount_returns_when_ready_and_exits_after_unmount(
    array_path: Path, tmp_path: Path
) -> None:
    mountpoint = tmp_path / "bg"
    mountpoint.mkdir()
    result = subprocess.run([ZARRFS, "mount", str(array_path), str(mountpoint)],
                            capture_output=True, text=True, timeout=30)
    try:
        assert result.returncode == 0, result.stderr
        assert (mountpoint / "data").read_bytes() == _reference().tobytes()
        with open(mountpoint / "data", "r+b") as f:
            f.write(b"\x09\x00")
    finally:
        subprocess.run(["fusermount3", "-u", str(mountpoint)], check=True)
    assert _tensorstore_read(array_path)[0, 0] == 9


def test_sigterm_with_dirty_data_loses_nothing(array_path: Path, tmp_path: Path) -> None:
    with mounted(array_path, tmp_path / "m") as mount:
        fd = os.open(mount.data, os.O_RDWR)
        with mmap.mmap(fd, 0) as mapped:
            mapped[:4] = b"\x0a\x00\x0b\x00"
        os.close(fd)  # no fsync: the pages reach the daemon on munmap/close, then SIGTERM
        assert mount.stop(signal.SIGTERM) == 0
        assert not is_mounted(mount.path)
    assert _tensorstore_read(array_path).reshape(-1)[:2].tolist() == [10, 11]


@pytest.mark.parametrize("source, message", [
    ("/nonexistent/array.zarr", "zarr.json: not found"),
    ("bad-json", "zarr.json: not valid JSON"),
    ("bad-codec", "unknown codec 'lzma'"),
])
def test_a_bad_source_fails_the_mount_with_one_clear_line(tmp_path: Path, source: str, message: str) -> None:
    if source == "bad-json":
        (tmp_path / source).mkdir()
        (tmp_path / source / "zarr.json").write_text("{not json")
        source = str(tmp_path / source)
    elif source == "bad-codec":
        _create(tmp_path / source, shards=False)
        doc = json.loads((tmp_path / source / "zarr.json").read_text())
        doc["codecs"].append({"name": "lzma"})
        (tmp_path / source / "zarr.json").write_text(json.dumps(doc))
        source = str(tmp_path / source)
    mountpoint = tmp_path / "mp"
    mountpoint.mkdir()
    result = subprocess.run([ZARRFS, "mount", source, str(mountpoint)], capture_output=True,
                            text=True, timeout=30)
    assert result.returncode != 0
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert not is_mounted(mountpoint)


def test_bad_mountpoint_and_option_fail_clearly(array_path: Path, tmp_path: Path) -> None:
    missing = subprocess.run([ZARRFS, "mount", str(array_path), str(tmp_path / "nope")],
                             capture_output=True, text=True, timeout=30)
    assert missing.returncode != 0 and "does not exist" in missing.stderr
    (tmp_path / "mp").mkdir()
    bad = subprocess.run([ZARRFS, "mount", str(array_path), str(tmp_path / "mp"), "-o", "cache=lots"],
                         capture_output=True, text=True, timeout=30)
    assert bad.returncode != 0 and "cache" in bad.stderr and "Traceback" not in bad.stderr
    secret = subprocess.run([ZARRFS, "mount", str(array_path), str(tmp_path / "mp"), "-o", "secret=x"],
                            capture_output=True, text=True, timeout=30)
    assert secret.returncode != 0 and "environment" in secret.stderr


def test_a_corrupt_chunk_is_eio_for_its_region_only(tmp_path: Path, mount_array: Any) -> None:
    # Rows of one 4 KiB page each, so the kernel's page granularity cannot blur the regions.
    path = tmp_path / "rows.zarr"
    subprocess.run([ZARRFS, "create", str(path), "--shape", "200,2048", "--dtype", "uint16",
                    "--chunks", "20,2048", "--codec", "zstd:1"], check=True)
    reference = np.arange(200 * 2048, dtype=np.uint32).astype(DTYPE).reshape(200, 2048)
    spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path)}}
    ts.open(spec).result().write(reference).result()
    (path / "c" / "1" / "0").write_bytes(b"garbage" * 10)
    mount = mount_array(path)
    row = 2048 * 2
    fd = os.open(mount.data, os.O_RDONLY)
    try:
        with pytest.raises(OSError) as bad:
            os.pread(fd, row, 25 * row)  # row 25 lies in chunk (1, 0)
        assert bad.value.errno == errno.EIO
        assert os.pread(fd, row, 0) == reference[0].tobytes()
        assert os.pread(fd, row, 100 * row) == reference[100].tobytes()
        assert os.pread(fd, 2 * row, 18 * row) == reference[18:20].tobytes()
    finally:
        os.close(fd)
    assert "'c/1/0'" in mount.log()


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
    assert mount.data.read_bytes() == _reference().tobytes()
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
