"""data.tif's decoded tiles read in parts, without FUSE (`decoded_tiles`): a tile's first
partial request decodes it whole and keeps it outside the array's cache, the rest of it is then
answered at once (as `dd bs=1M`'s next request is); a write to the array (this mount's, or
another writer's found by a recheck) is never hidden by a tile kept from before it."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tifffile
import zarr
from zarr.codecs import ZstdCodec

from tests.helpers.tiff_view_reader import ViewReader
from zarrfs.array_metadata import open_array
from zarrfs.declared import OptionValues
from zarrfs.grid import Box
from zarrfs.store import Store
from zarrfs.views.files import FileForm
from zarrfs.views.placement.core import NOWHERE
from zarrfs.views.tiff.array_file import TiffFile, tiff_file
from zarrfs.views.tiff.decoded_tiles import KEPT_TILE_BYTES

pytestmark = pytest.mark.fast

SHAPE, CHUNK = (512, 512), (256, 256)
TILE = 256 * 256 * 4  # (float32: 256 KiB)


def stored(path: Path) -> np.ndarray[Any, Any]:
    data = np.random.default_rng(1).standard_normal(SHAPE).astype("float32")
    array = zarr.create_array(path, shape=SHAPE, chunks=CHUNK, dtype="float32",
                              compressors=ZstdCodec(level=1))
    array[...] = data
    return data


def view(path: Path) -> tuple[TiffFile, Any, list[int]]:
    """data.tif of the array at `path` (a default mount's: decoded tiles), the array, and
    where its tiles are."""
    array = open_array(Store.open(str(path)))
    tif = tiff_file(array, FileForm("little", OptionValues({})), lambda: NOWHERE)
    with tifffile.TiffFile(io.BufferedReader(ViewReader(tif, 1 << 20), 1 << 16)) as tiff:
        page = tiff.pages[0]
        assert page.compression == 1 and set(page.databytecounts) == {TILE}  # type: ignore[union-attr]
        offsets = [int(offset) for offset in page.dataoffsets]  # type: ignore[union-attr]
    return tif, array, offsets


def tile_bytes(data: np.ndarray[Any, Any], tile: int) -> bytes:
    row, column = divmod(tile, 2)
    return data[row * 256 : (row + 1) * 256, column * 256 : (column + 1) * 256].astype("<f4").tobytes()


def in_parts(tif: TiffFile, offset: int, cut: int) -> bytes:
    """A tile read in two requests, as `dd bs=1M` reads one a request ends inside."""
    return bytes(tif.read(offset, cut)) + bytes(tif.read(offset + cut, TILE - cut))


def test_a_tile_read_in_parts_is_decoded_once_and_kept_outside_the_cache(tmp_path: Path) -> None:
    data = stored(tmp_path / "a.zarr")
    tif, array, offsets = view(tmp_path / "a.zarr")
    decoded = lambda: array.shared.counters.snapshot()["chunks_decoded"]  # noqa: E731
    before = decoded()
    head = bytes(tif.read(offsets[3] + 1000, 70000))  # (neither end of the tile)
    rest = tif.ready(offsets[3] + 71000, TILE - 71000)  # (answered at once: no worker thread)
    assert rest is not None
    assert bytes(tif.ready(offsets[3], 1000) or b"") + head + bytes(rest) == tile_bytes(data, 3)
    assert decoded() - before == 1
    assert not array.cached([Box((256, 256), (512, 512))])  # (its memory not in the cache)
    assert tif.ready(offsets[2] + 4096, 4096) is None  # (a tile not read: not at hand)
    assert bytes(tif.read(offsets[2], TILE)) == tile_bytes(data, 2)  # (whole: kept nowhere)
    assert tif.ready(offsets[2] + 4096, 4096) is None


def test_a_tile_too_large_to_keep_is_read_in_parts_through_the_cache(tmp_path: Path) -> None:
    """A tile of 4 MiB (more than KEPT_TILE_BYTES): in the cache, within its bound."""
    assert KEPT_TILE_BYTES < 4 << 20
    data = np.random.default_rng(2).standard_normal((1024, 1024)).astype("float32")
    zarr.create_array(tmp_path / "a.zarr", shape=data.shape, chunks=data.shape, dtype="float32")[...] = data
    array = open_array(Store.open(str(tmp_path / "a.zarr")))
    tif = tiff_file(array, FileForm("little", OptionValues({})), lambda: NOWHERE)
    with tifffile.TiffFile(io.BufferedReader(ViewReader(tif, 1 << 20), 1 << 16)) as tiff:
        at = int(tiff.pages[0].dataoffsets[0])  # type: ignore[union-attr]
    head = bytes(tif.read(at, 1 << 20))
    assert array.cached([Box((0, 0), data.shape)])
    assert head + bytes(tif.ready(at + (1 << 20), 3 << 20) or b"") == data.astype("<f4").tobytes()


def test_a_write_through_the_array_shows_in_a_tile_read_in_parts(tmp_path: Path) -> None:
    """The tile was kept at its first partial read; written (as through `data`, or any view
    of the array), its next partial reads are the new values, before and after the cut."""
    data = stored(tmp_path / "a.zarr")
    tif, array, offsets = view(tmp_path / "a.zarr")
    assert bytes(tif.read(offsets[1], 5000)) == tile_bytes(data, 1)[:5000]
    new = np.full((256, 256), 7.5, np.float32)
    array.write(Box((0, 256), (256, 512)), new)
    data[:256, 256:] = new
    assert tif.ready(offsets[1] + 5000, TILE - 5000) in (None, tile_bytes(data, 1)[5000:])
    assert in_parts(tif, offsets[1], 5000) == tile_bytes(data, 1)
    array.flush()
    array.write(Box((10, 300), (11, 301)), np.full((1, 1), -1, np.float32))  # (a chunk now cached)
    data[10, 300] = -1
    assert in_parts(tif, offsets[1], 3 * 4096) == tile_bytes(data, 1)


@pytest.mark.parametrize("seen_by", ["recheck", "open"])
def test_another_writers_change_shows_once_seen(tmp_path: Path, seen_by: str) -> None:
    """Another writer rewrites a tile's chunk after it was kept: a recheck (or an open's,
    `forget_fetched`) makes the next partial read decode the chunk as stored now."""
    data = stored(tmp_path / "a.zarr")
    tif, array, offsets = view(tmp_path / "a.zarr")
    assert in_parts(tif, offsets[0], 100000) == tile_bytes(data, 0)
    data[:256, :256] = 3.25
    zarr.open_array(tmp_path / "a.zarr", mode="r+")[:256, :256] = data[:256, :256]
    if seen_by == "recheck":
        assert array.recheck().chunks == {(0, 0)}
    else:
        tif.forget_fetched()
    assert in_parts(tif, offsets[0], 100000) == tile_bytes(data, 0)
