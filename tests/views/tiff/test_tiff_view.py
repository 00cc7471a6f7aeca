"""data.tif without FUSE: arrays written by zarr-python, opened by zarrfs, their TIFF view read
by tifffile from the view's bytes, compared with zarr-python's reading; which tiles pass
through as stored and which are decoded; strips; BigTIFF; the pieces' index math."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np
import pytest
import tifffile
import zarr
from zarr.codecs import BloscCodec, BytesCodec, Crc32cCodec, GzipCodec, ZstdCodec

from tests.helpers.tiff_view_reader import ViewReader
from zarrfs.array_metadata import open_array
from zarrfs.declared import OptionValues
from zarrfs.grid import Box
from zarrfs.store import Store
from zarrfs.views.files import FileForm
from zarrfs.views.placement.core import NOWHERE, Placement
from zarrfs.views.plugins import PLUGIN_FILTERS
from zarrfs.views.tiff.array_file import TiffFile, shows_tiff, tiff_file
from zarrfs.views.tiff.directories import IMAGE_WIDTH, Tag, TiffImage, tiff_header
from zarrfs.views.tiff.layout import Pieces, Slots
from zarrfs.views.tiff.ome_tiff import multiscale_of, ome_tiff_file
from zarrfs.views.tiff.stored_tiles import Scratch
from zarrfs.views.tiff.tables import Stepped

pytestmark = pytest.mark.fast




def values(shape: tuple[int, ...], dtype: str, seed: int = 0) -> np.ndarray[Any, Any]:
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.random(shape) > 0.5
    if np.dtype(dtype).kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    return rng.integers(0, 100, shape).astype(dtype)


def written(path: Path, data: np.ndarray[Any, Any], **kwargs: Any) -> Path:
    array = zarr.create_array(path, shape=data.shape, dtype=data.dtype, **kwargs)
    array[...] = data
    return path


def view_of(path: Path, byteorder: str = "little", placement: Placement = NOWHERE, *,
            plugins: bool = False) -> tuple[TiffFile, Any]:
    """`data.tif` of the array at `path`; `plugins`: as `-o filters=plugins` makes it."""
    array = open_array(Store.open(str(path)))
    assert shows_tiff(array)
    form = FileForm(byteorder, OptionValues({PLUGIN_FILTERS: plugins}))
    return tiff_file(array, form, lambda: placement), array


def read_tiff(view: TiffFile) -> tuple[np.ndarray[Any, Any], list[Any]]:
    with tifffile.TiffFile(io.BufferedReader(ViewReader(view), 1 << 16)) as tiff:
        pages = list(tiff.pages)
        return np.stack([page.asarray() for page in pages]), pages  # type: ignore[union-attr]


def as_array_shape(pixels: np.ndarray[Any, Any], shape: tuple[int, ...]) -> np.ndarray[Any, Any]:
    """tifffile gives planes of separate samples first, as the array has them."""
    return pixels.reshape(shape)


# Each chain's TIFF compression when its chunks pass through as stored (None: never, decoded).
CHAINS = {
    "zstd": ({"compressors": ZstdCodec(level=1)}, 50000),
    "zstd+crc32c": ({"compressors": [ZstdCodec(level=1), Crc32cCodec()]}, 50000),
    "uncompressed": ({"compressors": None}, 1),
    "blosc": ({"compressors": BloscCodec(cname="lz4")}, None),
    "gzip": ({"compressors": GzipCodec()}, None),
    "big-endian bytes": ({"compressors": None, "serializer": BytesCodec(endian="big")}, None),
}
EVERY_READERS = (1, 8)  # (compressions every TIFF reader decodes: the tiles pass through on any mount)


@pytest.mark.parametrize("chain", list(CHAINS))
@pytest.mark.parametrize("sharded", [False, True], ids=["plain", "sharded"])
@pytest.mark.parametrize("filters", ["builtin", "plugins"])
def test_tiles_as_stored_or_decoded(tmp_path: Path, chain: str, sharded: bool, filters: str) -> None:
    """Chunks compressed as every reader decodes pass through; zstd chunks only with
    `filters=plugins` (else decoded, uncompressed); other chunks are always decoded."""
    data = values((100, 150), "uint16")
    data[:32, :48] = 0  # a chunk (an inner chunk) of fill values: not stored
    options, stored = CHAINS[chain]
    passes = stored is not None and (filters == "plugins" or stored in EVERY_READERS)
    compression = stored if passes else 1
    chunks = {"shards": (64, 96), "chunks": (32, 48)} if sharded else {"chunks": (32, 48)}
    view, array = view_of(written(tmp_path / "a.zarr", data, fill_value=0, **chunks, **options),
                          plugins=filters == "plugins")
    pixels, pages = read_tiff(view)
    assert np.array_equal(pixels[0], data)
    page = pages[0]
    assert (page.compression, page.tilewidth, page.tilelength) == (compression, 48, 32)
    decoded = array.shared.counters.snapshot()["chunks_decoded"]
    assert (decoded == 0) == passes
    if passes and compression != 1:  # every missing tile points at the one fill tile, after the others
        offsets = page.dataoffsets
        missing = [i for i, offset in enumerate(offsets) if offset == offsets[0]]
        assert missing == [0] and offsets[0] > max(offsets[1:])
    if passes:  # a tile is its chunk's stored bytes, without the checksum, and nothing else
        trailer = 4 if "crc32c" in chain else 0
        for tile, (offset, count) in enumerate(zip(page.dataoffsets, page.databytecounts, strict=True)):
            row, column = divmod(tile, 4)
            want = stored_chunk(tmp_path / "a.zarr", (row, column), (2, 2) if sharded else None)
            raw = bytes(view.read(offset, count))
            assert raw == (want[: len(want) - trailer] if want else raw), tile
            assert count == (len(want) - trailer if want else count)


def stored_chunk(path: Path, chunk: tuple[int, int], per_shard: tuple[int, int] | None) -> bytes | None:
    """Chunk `chunk`'s stored bytes as zarr-python wrote them under `path` (v3 keys): its
    object, or, `per_shard` inner chunks a shard, its bytes where its shard's index (at the
    end: offset, length pairs and a CRC32C) says; None: not stored."""
    if per_shard is None:
        key = path / "c" / str(chunk[0]) / str(chunk[1])
        return key.read_bytes() if key.exists() else None
    shard = path / "c" / str(chunk[0] // per_shard[0]) / str(chunk[1] // per_shard[1])
    if not shard.exists():
        return None
    stored = shard.read_bytes()
    index = np.frombuffer(stored[-(16 * per_shard[0] * per_shard[1] + 4) : -4], "<u8").reshape(-1, 2)
    offset, length = index[(chunk[0] % per_shard[0]) * per_shard[1] + chunk[1] % per_shard[1]]
    return None if offset == 2**64 - 1 else stored[int(offset) : int(offset + length)]


def test_v2_zlib_passes_through_as_deflate(tmp_path: Path) -> None:
    data = values((64, 80), "int32")
    written(tmp_path / "a.zarr", data, chunks=(32, 16), zarr_format=2, compressors=numcodecs.Zlib(level=3))
    view, array = view_of(tmp_path / "a.zarr")
    pixels, pages = read_tiff(view)
    assert np.array_equal(pixels[0], data) and pages[0].compression == 8
    assert array.shared.counters.snapshot()["chunks_decoded"] == 0
    page = pages[0]
    for tile, (offset, count) in enumerate(zip(page.dataoffsets, page.databytecounts, strict=True)):
        chunk = (tmp_path / "a.zarr" / f"{tile // 5}.{tile % 5}").read_bytes()
        assert bytes(view.read(offset, count)) == chunk  # (the stored zlib stream, no padding)


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint8", "int16", "uint32", "int64", "uint64", "float16",
                                   "float32", "float64", "complex64", "complex128"])
def test_element_types(tmp_path: Path, dtype: str) -> None:
    data = values((40, 32), dtype)
    view, _ = view_of(written(tmp_path / "a.zarr", data, chunks=(16, 16), compressors=ZstdCodec()))
    pixels, _ = read_tiff(view)
    assert pixels[0].dtype == (np.uint8 if dtype == "bool" else np.dtype(dtype))
    assert np.array_equal(pixels[0], data.astype(pixels.dtype))


@pytest.mark.parametrize(("shape", "chunks", "pages"), [
    ((3, 40, 48), (1, 16, 16), 1),   # rank 3: samples in separate planes, tiles as stored
    ((3, 40, 48), (2, 16, 32), 1),   # a chunk spans planes: decoded tiles
    ((2, 3, 40, 48), (1, 1, 16, 16), 2),  # rank 4: a page per index of the first axis
    ((2, 2, 2, 20, 24), (1, 2, 1, 16, 16), 4),
])
def test_planes_and_pages(tmp_path: Path, shape: tuple[int, ...], chunks: tuple[int, ...],
                          pages: int) -> None:
    data = values(shape, "float32")
    view, _ = view_of(written(tmp_path / "a.zarr", data, chunks=chunks, compressors=ZstdCodec()))
    pixels, found = read_tiff(view)
    samples = shape[-3] if len(shape) >= 3 else 1
    assert len(found) == pages and found[0].samplesperpixel == samples
    assert np.array_equal(pixels.reshape(shape), data)


def test_strips_when_chunks_are_not_multiples_of_16(tmp_path: Path) -> None:
    data = values((2, 50, 70), "uint16")
    view, _ = view_of(written(tmp_path / "a.zarr", data, chunks=(1, 25, 35), compressors=ZstdCodec()))
    pixels, pages = read_tiff(view)
    assert not pages[0].is_tiled and pages[0].compression == 1
    assert np.array_equal(pixels.reshape(data.shape), data)


def test_big_endian_file(tmp_path: Path) -> None:
    data = values((48, 48), "float64")
    view, _ = view_of(written(tmp_path / "a.zarr", data, chunks=(16, 16), compressors=ZstdCodec()), "big")
    assert bytes(view.read(0, 4)) == b"MM\0*"
    pixels, pages = read_tiff(view)
    assert np.array_equal(pixels[0], data) and pages[0].compression == 1  # (stored little-endian: decoded)
    stored_big = written(tmp_path / "b.zarr", data, chunks=(16, 16), serializer=BytesCodec(endian="big"),
                         compressors=ZstdCodec())
    view, _ = view_of(stored_big, "big", plugins=True)
    pixels, pages = read_tiff(view)
    assert np.array_equal(pixels[0], data) and pages[0].compression == 50000


def test_bigtiff_past_4_gib(tmp_path: Path) -> None:
    """A sparse array whose decoded tiles pass 4 GiB: BigTIFF, 64-bit offsets, a window read."""
    array = zarr.create_array(tmp_path / "a.zarr", shape=(66000, 66000), chunks=(1024, 1024), dtype="uint8",
                              compressors=BloscCodec(), fill_value=7)
    array[65600:65610, 100:110] = 3
    view, _ = view_of(tmp_path / "a.zarr")
    assert view.big and view.size > 1 << 32 and bytes(view.read(0, 4)) == b"II+\0"
    with tifffile.TiffFile(io.BufferedReader(ViewReader(view), 1 << 16)) as tiff:
        page = tiff.pages[0]
        assert tiff.is_bigtiff and page.shape == (66000, 66000)  # type: ignore[union-attr]
        tile = 64 * 65 + 0  # the tile holding rows 65536.. and columns 0..
        offset, count = page.dataoffsets[tile], page.databytecounts[tile]  # type: ignore[union-attr]
        assert offset > 1 << 32
        pixels = np.frombuffer(bytes(view.read(offset, count)), np.uint8).reshape(1024, 1024)
    want = np.full((1024, 1024), 7, np.uint8)
    want[65600 - 65536 : 65610 - 65536, 100:110] = 3
    assert np.array_equal(pixels, want)


def test_no_view_for_what_tiff_cannot_hold(tmp_path: Path) -> None:
    for name, shape, dtype in [("rank1", (10,), "uint8"), ("int4", (16, 16), "int4"),
                               ("bfloat16", (16, 16), "bfloat16"), ("empty", (0, 16), "uint8")]:
        (tmp_path / name).mkdir()
        (tmp_path / name / "zarr.json").write_text(json.dumps({
            "zarr_format": 3, "node_type": "array", "shape": shape, "data_type": dtype,
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [16] * len(shape)}},
            "chunk_key_encoding": {"name": "default"}, "fill_value": 0,
            "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}]}))
        assert not shows_tiff(open_array(Store.open(str(tmp_path / name)))), name


def test_pieces_cover_a_range_once() -> None:
    pieces = Pieces.of([5, 3, 0, 7])
    assert pieces.total == 15
    assert list(pieces.spans(0, 15)) == [(0, 0, 5), (1, 0, 3), (3, 0, 7)]
    assert list(pieces.spans(4, 3)) == [(0, 4, 1), (1, 0, 2)]
    assert list(pieces.spans(9, 100)) == [(3, 1, 6)]
    assert list(pieces.spans(15, 10)) == []


def test_aligned_pieces_start_at_multiples_with_zeros_between() -> None:
    pieces = Pieces.of([5, 3, 0, 7], align=4)
    assert list(pieces.starts) == [0, 8, 12, 12] and pieces.total == 20
    assert list(pieces.spans(0, 20)) == [(0, 0, 8), (1, 0, 4), (3, 0, 8)]  # (past a length: zeros)
    assert list(pieces.spans(6, 3)) == [(0, 6, 2), (1, 0, 1)]


def test_slots_are_pieces_of_one_size() -> None:
    slots = Slots(8, 3, 5)
    assert slots.total == 24 and slots.length(2) == 5
    assert list(slots.spans(6, 12)) == [(0, 6, 2), (1, 0, 8), (2, 0, 2)]
    assert list(slots.spans(20, 10)) == [(2, 4, 4)]
    assert list(slots.offsets().values(0, 3)) == [0, 8, 16]


def test_a_header_of_a_million_tiles_makes_its_tables_as_read() -> None:
    """The tables of 10^6 tiles (8 MB) are not in the header's bytes: their values are made
    where a reader reads them."""
    count = 1_000_000
    image = TiffImage((Tag.long(IMAGE_WIDTH, 16),), Stepped(count, 0, 4096), Stepped(count, 300, 0),
                      tiled=True)
    header = tiff_header([image], count * 4096)  # (classic TIFF: 4 bytes a value)
    offsets, counts = header.tables
    assert len(header.contents) < 1024 and header.data_start >= counts.end == offsets.at + 8 * count
    assert np.frombuffer(header.read(counts.at + 4 * 10, 8), "<u4").tolist() == [300, 300]
    ten_and_eleven = np.array([header.data_start + 4096 * 10, header.data_start + 4096 * 11], "<u4").tobytes()
    assert header.read(offsets.at + 4 * 10 + 2, 4) == ten_and_eleven[2:6]  # (a read not on a value's edge)
    first = np.frombuffer(header.read(offsets.at + 4 * (count - 2), 8), "<u4")
    assert first.tolist() == [header.data_start + 4096 * (count - 2), header.data_start + 4096 * (count - 1)]


@pytest.mark.parametrize("version", ["0.4", "0.5"])
def test_ome_zarr_pyramid_as_ome_tiff(tmp_path: Path, version: str) -> None:
    """Every level of the multiscale as SubIFDs of the full resolution's planes, with OME-XML:
    tifffile sees the OME series, its axes, sizes, levels and physical sizes."""
    from ome_zarr.format import FormatV04, FormatV05
    from ome_zarr.writer import write_image

    group = zarr.open_group(tmp_path / "image.zarr", mode="w", zarr_format=2 if version == "0.4" else 3)
    data = values((2, 3, 256, 384), "uint16")
    axes = [{"name": "c", "type": "channel"},
            *({"name": name, "type": "space", "unit": "micrometer"} for name in "zyx")]
    write_image(data, group, axes=axes,
                fmt=FormatV04() if version == "0.4" else FormatV05(), scale_factors=[2, 4],
                storage_options={"chunks": (1, 1, 64, 128)})
    attributes = dict(group.attrs)
    block = attributes["ome"] if version == "0.5" else attributes
    multiscale_attributes = block["multiscales"][0]  # (physical sizes of our own; ome-zarr drops units)
    multiscale_attributes["axes"] = axes
    for n, dataset in enumerate(multiscale_attributes["datasets"]):
        scale = [1.0, 2.0, 0.5 * 2**n, 0.25 * 2**n]
        dataset["coordinateTransformations"] = [{"type": "scale", "scale": scale}]
    group.attrs.update(attributes)
    multiscale = multiscale_of(dict(group.attrs))
    assert multiscale is not None
    levels = [open_array(Store.open(str(tmp_path / "image.zarr" / path))) for path in multiscale.paths]
    view = ome_tiff_file(multiscale, levels, FileForm())
    assert view is not None
    with tifffile.TiffFile(io.BufferedReader(ViewReader(view), 1 << 16)) as tiff:
        assert tiff.is_ome and len(tiff.pages) == 6
        series = tiff.series[0]
        assert series.axes == "CZYX" and series.shape == data.shape and len(series.levels) == 3
        assert np.array_equal(series.asarray(), data)
        for level, path in zip(series.levels[1:], multiscale.paths[1:], strict=True):
            assert np.array_equal(level.asarray(), zarr.open_array(tmp_path / "image.zarr" / path)[...])
        pixels = tifffile.xml2dict(tiff.ome_metadata)["OME"]["Image"]["Pixels"]
        assert (pixels["PhysicalSizeX"], pixels["PhysicalSizeY"], pixels["PhysicalSizeZ"]) == (0.25, 0.5, 2.0)
        assert pixels["PhysicalSizeXUnit"] == "µm" and tiff.pages[0].compression in (1, 50000)


@pytest.mark.parametrize("sharded", [False, True], ids=["plain", "sharded"])
def test_rectilinear_grids(tmp_path: Path, sharded: bool) -> None:
    """Chunks of many shapes are no tiles: strips; the inner chunks of its shards are a regular
    grid: decoded tiles (their shards' indexes differ in shape, so none goes out as stored)."""
    inner = [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "zstd", "configuration": {}}]
    codecs = [{"name": "sharding_indexed", "configuration": {
        "chunk_shape": [16, 16], "codecs": inner, "index_location": "end",
        "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}]}}] if sharded else inner
    (tmp_path / "a.zarr").mkdir()
    (tmp_path / "a.zarr" / "zarr.json").write_text(json.dumps({
        "zarr_format": 3, "node_type": "array", "shape": [128, 64], "data_type": "uint16", "fill_value": 0,
        "chunk_grid": {"name": "rectilinear", "configuration": {"kind": "inline",
                                                                "chunk_shapes": [[32, 64, 32], [48, 16]]}},
        "chunk_key_encoding": {"name": "default"}, "codecs": codecs}))
    array = open_array(Store.open(str(tmp_path / "a.zarr")))
    data = values((128, 64), "uint16")
    array.write(Box((0, 0), (128, 64)), data)
    array.flush()
    view, _ = view_of(tmp_path / "a.zarr")
    pixels, pages = read_tiff(view)
    assert np.array_equal(pixels[0], data)
    assert pages[0].is_tiled == sharded and pages[0].compression == 1


def test_the_scratch_buffer_pads_each_tile_whatever_it_held_before() -> None:
    # A tile is read into the thread's buffer and padded there; only the bytes the tile
    # before left are written again. Every slot must still read as its tile, its padding
    # and zeros: after longer and shorter tiles, and after a longer slot of another file.
    scratch = Scratch()
    header = b"HEADER!!"
    for length, size in [(200, 100), (200, 50), (200, 120), (300, 280), (200, 10), (300, 5), (200, 192)]:
        slot = scratch.lend(("file", length, size), length)
        scratch.wrote(size)
        slot[:size] = b"\xff" * size
        head = header[: min(len(header), length - size)]
        scratch.fill(size, head, length)
        assert bytes(slot) == b"\xff" * size + head + bytes(length - size - len(head)), (length, size)
        assert scratch.holding(("file", length, size)) is not None
