"""Real scale: an access costs store requests in proportion to what it touches, never to the
array's chunk count (issue 37). Counted with the daemon's request log on arrays of 10^5
chunks (a dense twin) and of 10^9 grid cells with three chunks stored (a sparse giant)."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tifffile

from tests.helpers.mounting import Mount, MountFactory, pread
from tests.helpers.scale_arrays import RequestLog, Requests, chunks_touched, values, write_twin

# 10,000 x 10 chunks of 16 x 16: rows of 160 bytes, so a small read touches few chunks, and
# chunk keys c/I/J spread over 10,000 directories of 10 (a listing of one is cheap, of the
# array is not).
GRID, CHUNK = (10_000, 10), (16, 16)
SHAPE = (GRID[0] * CHUNK[0], GRID[1] * CHUNK[1])
# Sparse giant: a 1,000,000 x 1,000,000 canvas in 32 x 32 chunks (31,250^2, about 10^9 cells)
GIANT_SHAPE, GIANT_CHUNK = (1_000_000, 1_000_000), (32, 32)
GIANT_GRID = (GIANT_SHAPE[0] // GIANT_CHUNK[0], GIANT_SHAPE[1] // GIANT_CHUNK[1])
GIANT_STORED = [(0, 0), (15_625, 15_625), (31_249, 31_249)]
TABLE_PAGE_TILES = 1024  # (tiles a 4 KiB page of a classic TIFF's table holds: libtiff reads pages)
FEW = 16  # requests an access that touches no chunk may make (metadata, a directory or two)
KIB = 1 << 10


@pytest.fixture(scope="module")
def dense(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_twin(tmp_path_factory.mktemp("scale") / "dense.zarr", GRID, CHUNK)


@pytest.fixture(scope="module")
def giant(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_twin(tmp_path_factory.mktemp("scale") / "giant.zarr",
                      (GIANT_SHAPE[0] // GIANT_CHUNK[0], GIANT_SHAPE[1] // GIANT_CHUNK[1]),
                      GIANT_CHUNK, stored=GIANT_STORED, shape=GIANT_SHAPE)


@pytest.fixture
def counted(tmp_path: Path, mount_array: MountFactory) -> Iterator[tuple[RequestLog, MountFactory]]:
    log = RequestLog(tmp_path / "requests.log")

    def mount(source: Path, options: tuple[str, ...] = ()) -> Mount:
        return mount_array(source, options, env=log.env)

    yield log, mount


def assert_few(requests: Requests, what: str, limit: int = FEW) -> None:
    assert requests.count() <= limit, f"{what}: {requests.summary()}"


def test_mounting_and_stat_of_every_file_cost_a_few_requests(
        dense: Path, counted: tuple[RequestLog, MountFactory]) -> None:
    """Every file but data.tif (its own test, below)."""
    log, mount = counted
    mnt = mount(dense, ("views=npy:nrrd:mhd:vrt:nc:ome",))
    assert_few(log.take(), "mount")
    names = sorted(os.listdir(mnt.path))
    assert {"data", "data.npy", "data.raw.nhdr", "data.vrt", "chunks", "zarr.json"} <= set(names)
    assert_few(log.take(), "ls")
    for name in names:
        os.stat(mnt.path / name)
        assert_few(log.take(), f"stat {name}")


def test_stat_of_data_tif_costs_a_few_requests(dense: Path, counted: tuple[RequestLog, MountFactory]) -> None:
    log, mount = counted
    mnt = mount(dense)
    log.take()
    os.stat(mnt.path / "data.tif")
    assert_few(log.take(), "stat data.tif")


def test_data_tif_tables_cost_a_look_at_each_chunk_and_a_tile_costs_its_chunk(
        dense: Path, counted: tuple[RequestLog, MountFactory], tmp_path: Path) -> None:
    """tifffile reads every tile's offset and byte count (10^5 of each): each chunk's stored
    size is looked at once (a scan of the directories of its rows, or a stat), none is read;
    GDAL's window of one tile costs that tile's chunk and the sizes of the tiles of the table
    pages it reads (a stat each of a few hundred, no listing), whatever the array. (Zstd tiles
    as stored: `filters=plugins`; a default mount's are decoded, below.)"""
    log, mount = counted
    mnt = mount(dense, ("filters=plugins",))
    tif = mnt.path / "data.tif"
    log.take()
    with tifffile.TiffFile(tif) as tiff:
        page = tiff.pages[0]
        assert len(page.dataoffsets) == GRID[0] * GRID[1] == len(set(page.dataoffsets))  # type: ignore[union-attr]
        assert list(page.databytecounts[:3]) == [  # type: ignore[union-attr]
            (dense / "c" / "0" / str(column)).stat().st_size for column in range(3)]
    opened = log.take()  # (the open's close-to-open check, and a look at each chunk)
    assert opened.read() == 0 and opened.count() <= GRID[0] * GRID[1] + 2, opened.summary()
    assert len(opened) <= 2 + GRID[0] * GRID[1] // 16, opened.summary()  # (most looks are scans)
    requests = gdal_window_of_one_tile(tif, tmp_path, log, dense)
    assert requests.count("stat") <= 2 * TABLE_PAGE_TILES + 2, requests.summary()


def gdal_window_of_one_tile(tif: Path, tmp_path: Path, log: RequestLog, dense: Path) -> Requests:
    """GDAL's window of the tile at row 5000, column 5, its values checked; the requests it
    made, which read that tile's chunk and nothing else (a local tile in the page cache is
    read at no logged request), and list nothing."""
    row, column = 5000, 5
    window = tmp_path / "window.tif"
    subprocess.run(["gdal_translate", "-q", "-srcwin", str(column * CHUNK[1]), str(row * CHUNK[0]),
                    str(CHUNK[1]), str(CHUNK[0]), str(tif), str(window)], check=True)
    start = (row * CHUNK[0], column * CHUNK[1])
    assert np.array_equal(tifffile.imread(window), values(start, (start[0] + CHUNK[0], start[1] + CHUNK[1])))
    requests = log.take()
    assert {r.key for r in requests if r.kind != "stat"} <= {str(dense / "c" / str(row) / str(column))}
    assert requests.listed() == 0 and requests.read() <= 1, requests.summary()
    return requests


def test_decoded_data_tif_tables_cost_nothing_and_a_tile_costs_its_chunk(
        dense: Path, counted: tuple[RequestLog, MountFactory], tmp_path: Path) -> None:
    """A default mount's data.tif of zstd chunks: decoded tiles, whose tables are known without
    the store (every byte count the tile's size), so tifffile's read of 10^5 offsets and
    counts costs no request, and GDAL's window of one tile costs that tile's chunk."""
    log, mount = counted
    mnt = mount(dense)
    tif = mnt.path / "data.tif"
    log.take()
    with tifffile.TiffFile(tif) as tiff:
        page = tiff.pages[0]
        assert set(page.databytecounts) == {CHUNK[0] * CHUNK[1]}  # type: ignore[union-attr]
    opened = log.take()  # (the open's close-to-open check)
    assert_few(opened, "tables of decoded tiles")
    requests = gdal_window_of_one_tile(tif, tmp_path, log, dense)
    assert_few(requests, "a window of decoded tiles")


def test_a_small_read_fetches_the_chunks_it_touches(dense: Path,
                                                    counted: tuple[RequestLog, MountFactory]) -> None:
    log, mount = counted
    mnt = mount(dense)
    log.take()
    offset, size = SHAPE[0] // 2 * SHAPE[1], 16 * KIB
    with open(mnt.data, "rb") as f:
        data = os.pread(f.fileno(), size, offset)
    requests = log.take()
    # The kernel may widen a read to its readahead window (128 KiB here, -o readahead_kb),
    # never more: what the daemon reads besides must be bounded by what the reader asked.
    touched = chunks_touched(SHAPE, CHUNK, offset, 128 * KIB)
    assert requests.listed() == 0, requests.summary()
    assert 0 < requests.read() <= touched, requests.summary()
    rows = size // SHAPE[1]
    first = offset // SHAPE[1]
    assert data[: rows * SHAPE[1]] == values((first, 0), (first + rows, SHAPE[1])).tobytes()


def test_the_next_open_rechecks_only_what_was_read(dense: Path,
                                                   counted: tuple[RequestLog, MountFactory]) -> None:
    log, mount = counted
    mnt = mount(dense)
    offset, size = SHAPE[0] // 3 * SHAPE[1], 16 * KIB
    first = pread(mnt.data, size, offset)
    log.take()
    assert pread(mnt.data, size, offset) == first
    recheck = log.take()
    touched = chunks_touched(SHAPE, CHUNK, offset, 128 * KIB)
    assert recheck.count() <= touched + FEW, recheck.summary()
    assert recheck.listed() <= touched, recheck.summary()


def test_getfattr_and_a_chunk_row_listing_cost_what_they_show(
        dense: Path, counted: tuple[RequestLog, MountFactory]) -> None:
    log, mount = counted
    mnt = mount(dense)
    log.take()
    for name in os.listxattr(mnt.path):
        os.getxattr(mnt.path, name)
    assert_few(log.take(), "getfattr -d")
    row = mnt.path / "chunks" / "c" / "5000"
    assert sorted(os.listdir(row), key=int) == [str(j) for j in range(GRID[1])]
    listing = log.take()
    assert listing.count() <= GRID[1] + FEW, listing.summary()
    assert (row / "7").stat().st_size == CHUNK[0] * CHUNK[1]
    assert_few(log.take(), "stat of one chunk file")


def test_a_sparse_giant_costs_what_each_access_touches(giant: Path,
                                                       counted: tuple[RequestLog, MountFactory]) -> None:
    log, mount = counted
    mnt = mount(giant)
    assert_few(log.take(), "mount")
    for name in sorted(os.listdir(mnt.path)):
        os.stat(mnt.path / name)
    assert_few(log.take(), "stat of every file")
    # 1 KiB at the middle stored chunk's first row: 32 chunks of that row of the grid, one
    # stored, each missing one a lookup.
    i, j = GIANT_STORED[1]
    row, column = i * GIANT_CHUNK[0], j * GIANT_CHUNK[1] - 512
    offset = row * GIANT_SHAPE[1] + column
    expected = bytearray(KIB)  # (fill, but for the stored chunk's 32 elements)
    start = column + 512
    expected[512 : 512 + GIANT_CHUNK[1]] = values((row, start), (row + 1, start + GIANT_CHUNK[1])).tobytes()
    assert pread(mnt.data, KIB, offset) == expected
    read = log.take()
    touched = chunks_touched(GIANT_SHAPE, GIANT_CHUNK, offset, 128 * KIB)
    assert read.listed() == 0 and read.count() <= touched, read.summary()
    with open(mnt.data, "r+b") as f:
        os.pwrite(f.fileno(), b"\x01" * 64, offset)
        os.fsync(f.fileno())
    written = log.take()
    assert written.count() <= touched + FEW, written.summary()


@pytest.fixture(scope="module")
def flat_giant(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The giant's grid with chunk keys "c.I.J" and nothing stored: 10^9 files in chunks/."""
    path = write_twin(tmp_path_factory.mktemp("scale") / "flat.zarr",
                      (GIANT_SHAPE[0] // GIANT_CHUNK[0], GIANT_SHAPE[1] // GIANT_CHUNK[1]),
                      GIANT_CHUNK, stored=[], shape=GIANT_SHAPE)
    metadata = json.loads((path / "zarr.json").read_text())
    metadata["chunk_key_encoding"]["configuration"]["separator"] = "."
    (path / "zarr.json").write_text(json.dumps(metadata))
    return path


def test_a_chunk_row_of_the_giant_lists_its_cells_and_reads_one(
        giant: Path, counted: tuple[RequestLog, MountFactory]) -> None:
    """chunks/c/I/ names every chunk of the row from the grid: no listing of the store (of
    the row's prefix or of the array), whatever is stored; a file read costs its chunk."""
    log, mount = counted
    mnt = mount(giant)
    i, j = GIANT_STORED[1]
    row = mnt.path / "chunks" / "c" / str(i)
    log.take()
    names = os.listdir(row)
    assert len(names) == GIANT_GRID[1] and sorted(names, key=int) == [str(n) for n in range(GIANT_GRID[1])]
    assert log.take().count() == 0
    assert (row / str(j)).read_bytes() == values((i * 32, j * 32), ((i + 1) * 32, (j + 1) * 32)).tobytes()
    assert (row / str(j + 1)).read_bytes() == bytes(32 * 32)  # (missing: the fill value)
    read = log.take()
    assert read.listed() == 0 and read.read() <= 2, read.summary()


def test_a_directory_of_a_billion_chunk_files_streams(flat_giant: Path,
                                                      counted: tuple[RequestLog, MountFactory]) -> None:
    """readdir answers page by page from the offset the kernel gives: the first entries of
    chunks/ (10^9 of them) come without the rest being made, and cost no store request."""
    log, mount = counted
    mnt = mount(flat_giant)
    log.take()
    with os.scandir(mnt.path / "chunks") as entries:
        first = [entry.name for entry in itertools.islice(entries, 3 * KIB)]
    assert first == [f"c.0.{j}" for j in range(3 * KIB)]
    assert (mnt.path / "chunks" / f"c.{GIANT_GRID[0] - 1}.{GIANT_GRID[1] - 1}").stat().st_size == 32 * 32
    assert log.take().count() == 0


def test_getfattr_of_the_giant_costs_a_few_requests(giant: Path,
                                                    counted: tuple[RequestLog, MountFactory]) -> None:
    """Every user.zarr.* attribute comes from the array's metadata (none counts stored chunks:
    `zarrfs info` does, with a listing)."""
    log, mount = counted
    mnt = mount(giant)
    log.take()
    for path in (mnt.path, mnt.data):
        found = {name: os.getxattr(path, name) for name in os.listxattr(path)}
        assert found["user.zarr.shape"] == b"1000000,1000000", found
        assert found["user.zarr.chunks"] == b"32,32", found
    assert os.listxattr(mnt.path / "chunks" / "c" / "0" / "0") == []
    assert_few(log.take(), "getfattr -d", limit=2)


def peak_memory_mib(mount: Mount) -> int:
    """The daemon's peak resident memory so far (VmHWM), in MiB."""
    status = Path(f"/proc/{mount.process.pid}/status").read_text()
    return int(status.split("VmHWM:")[1].split()[0]) >> 10


def test_data_tif_of_a_sparse_grid_finds_its_chunks_without_a_key_per_cell(
        tmp_path: Path, counted: tuple[RequestLog, MountFactory]) -> None:
    """2,048 x 2,048 chunks, three stored: data.tif's size costs no request and its layout
    no table of 4 million cells (a key per cell took the daemon past 1.2 GB; a grid of 10^9
    cells, past all the machine's memory)."""
    stored = [(0, 0), (1000, 7), (2047, 2047)]
    path = write_twin(tmp_path / "sparse.zarr", (2048, 2048), (16, 16), stored=stored)
    log, mount = counted
    mnt = mount(path)
    log.take()
    assert (mnt.path / "data.tif").stat().st_size > 2048 * 2048 * 8  # (a tile table's two numbers per tile)
    listing = log.take()
    assert listing.read() == 0 and listing.listed() <= 2 * len(stored), listing.summary()
    assert (peak := peak_memory_mib(mnt)) < 640, f"the daemon took {peak} MiB"


def test_reopening_an_ome_tiff_pyramid_rechecks_each_level_once(
        tmp_path: Path, counted: tuple[RequestLog, MountFactory]) -> None:
    """An open of `data.ome.tif` rechecks each level as an open of its `data` does: its
    metadata and the chunks this mount read, not the level's thousands of chunks; the tile
    sizes are learned again as the tables are read, a look at each chunk, none read (zstd
    tiles as stored: `filters=plugins`)."""
    import zarr
    from ome_zarr.format import FormatV05
    from ome_zarr.writer import write_image

    group = zarr.open_group(tmp_path / "image.zarr", mode="w", zarr_format=3)
    image = np.arange(1024 * 1024, dtype="uint16").reshape(1, 1024, 1024)
    write_image(image, group, axes="cyx", fmt=FormatV05(), scale_factors=[2, 4],
                storage_options={"chunks": (1, 16, 16)})  # (4,096 chunks at full resolution)
    smallest = group[sorted(name for name, _ in group.arrays())[2]][0]
    log, mount = counted
    mnt = mount(tmp_path / "image.zarr", ("filters=plugins",))
    tif = mnt.path / "data.ome.tif"
    with tifffile.TiffFile(tif) as tiff:
        assert len(tiff.series[0].levels) == 3
        assert np.array_equal(tiff.series[0].levels[2].pages[0].asarray(), smallest)
    log.take()
    with tifffile.TiffFile(tif) as tiff:
        assert np.array_equal(tiff.series[0].levels[2].pages[0].asarray(), smallest)
    reopened = log.take()
    tiles = 16 * 16  # (level 2: 256 x 256 in 16 x 16 chunks, read again at most)
    chunks = 64 * 64 + 32 * 32 + tiles  # (each level's sizes looked at again: tifffile reads every table)
    assert reopened.count("stat") >= 3 and reopened.read() <= tiles, reopened.summary()
    assert reopened.count() <= 3 + chunks + tiles, reopened.summary()
