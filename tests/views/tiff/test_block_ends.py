"""No tile or strip of data.tif ends on a multiple of 64 KiB, without FUSE: geotiff.js 2 (Viv's,
so Avivator's) waits for ever on the block after a range that ends on one (`layout.READER_BLOCK`).
Arrays of tiles that fill whole pages (decoded, and stored uncompressed), of compressed chunks
whose stored sizes would put one on such an end, strips, and a BigTIFF: their tables read by
tifffile, their pixels equal to the array's, the bytes between their pieces zeros, and the
offsets ascending."""

from __future__ import annotations

import io
import zlib
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np
import pytest
import tifffile
import zarr
from zarr.codecs import ZstdCodec

from tests.helpers.tiff_view_reader import ViewReader, array_tiff
from zarrfs.views.tiff.array_file import TiffFile
from zarrfs.views.tiff.layout import Slots

pytestmark = pytest.mark.fast

BLOCK = 1 << 16


def pieces(tif: TiffFile) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Every page's pixels, and the offsets and byte counts of all their tiles or strips."""
    with tifffile.TiffFile(io.BufferedReader(ViewReader(tif, 1 << 20), 1 << 16)) as tiff:
        pages = list(tiff.pages)
        pixels = np.stack([page.asarray() for page in pages])  # type: ignore[union-attr]
        offsets = np.concatenate([page.dataoffsets for page in pages]).astype(np.int64)  # type: ignore[union-attr]
        counts = np.concatenate([page.databytecounts for page in pages]).astype(np.int64)  # type: ignore[union-attr]
        return pixels, offsets, counts, pages[0].compression  # type: ignore[union-attr]


def assert_off_block_ends(tif: TiffFile, offsets: np.ndarray, counts: np.ndarray, *,
                          zeros: bool = True) -> None:
    ends = offsets + counts
    assert not np.any(ends % BLOCK == 0), offsets[ends % BLOCK == 0]
    assert np.all(np.diff(offsets) > 0)  # (ascending, as a COG's)
    if zeros:  # (the bytes after each piece, up to the next, are zeros)
        order = np.argsort(offsets)
        starts, stops = offsets[order], ends[order]
        whole = np.frombuffer(bytes(tif.read(0, tif.size)), np.uint8)
        for stop, start in zip(stops[:-1], starts[1:], strict=True):
            assert not whole[stop:start].any(), (stop, start)


# (shape, chunks, dtype): tiles of 32 KiB (every other one would end on 64 KiB), 4 KiB and
# 12 KiB (an odd number of pages: a page after each run), 256 KiB (each one would).
FILLED_TILES = [((300, 500), (128, 128), "uint16"), ((200, 520), (64, 64), "uint8"),
                ((200, 300), (96, 32), "float32"), ((3, 300, 300), (1, 256, 256), "float32")]


@pytest.mark.parametrize(("shape", "chunks", "dtype"), FILLED_TILES, ids=["32k", "4k", "12k", "256k"])
@pytest.mark.parametrize("compressor", ["zstd", "none"], ids=["decoded", "stored"])
def test_tiles_that_fill_pages_end_off_blocks(tmp_path: Path, shape: tuple[int, ...], chunks: tuple[int, ...],
                                              dtype: str, compressor: str) -> None:
    data = (np.arange(np.prod(shape)) % 251).astype(dtype).reshape(shape)
    array = zarr.create_array(tmp_path / "a.zarr", shape=shape, chunks=chunks, dtype=dtype,
                              compressors=ZstdCodec(level=1) if compressor == "zstd" else None)
    array[...] = data
    tif = array_tiff(tmp_path / "a.zarr")
    pixels, offsets, counts, compression = pieces(tif)
    assert compression == 1 and set(counts) == {np.dtype(dtype).itemsize * chunks[-1] * chunks[-2]}
    assert np.array_equal(pixels.reshape(shape), data)
    assert_off_block_ends(tif, offsets, counts)


def chunk_of_size(size: int, chunk_bytes: int, encode: Any, alphabet: int) -> np.ndarray:
    """A chunk of `chunk_bytes` bytes (random ones of `alphabet` values, then zeros) that
    `encode` makes `size` long."""
    noise = np.random.default_rng(5).integers(0, alphabet, chunk_bytes, dtype=np.uint8)
    for random_bytes in range(chunk_bytes):
        chunk = np.concatenate([noise[:random_bytes], np.zeros(chunk_bytes - random_bytes, np.uint8)])
        if len(encode(chunk.tobytes())) == size:
            return chunk
    raise AssertionError(f"no chunk encodes to {size} bytes")


@pytest.mark.parametrize("codec", ["zlib", "zstd"])
def test_compressed_tiles_that_would_end_on_a_block_start_later(tmp_path: Path, codec: str) -> None:
    """Every chunk's stored size is 4 KiB: in slots of 20 KiB, tile 3 would end at 64 KiB."""
    if codec == "zlib":
        chunk = chunk_of_size(4096, 128 * 128, lambda raw: zlib.compress(raw, 1), 256)
    else:  # (zstd's sizes step by many bytes with 256 values)
        chunk = chunk_of_size(4096, 128 * 128, numcodecs.Zstd(level=1).encode, 16)
    data = np.tile(chunk.reshape(128, 128), (4, 4))
    if codec == "zlib":
        array = zarr.create_array(tmp_path / "a.zarr", shape=data.shape, chunks=(128, 128), dtype="uint8",
                                  zarr_format=2, compressors=numcodecs.Zlib(level=1))
    else:
        array = zarr.create_array(tmp_path / "a.zarr", shape=data.shape, chunks=(128, 128), dtype="uint8",
                                  compressors=ZstdCodec(level=1))
    array[...] = data
    tif = array_tiff(tmp_path / "a.zarr", plugins=True)
    pixels, offsets, counts, compression = pieces(tif)
    assert compression == (8 if codec == "zlib" else 50000) and set(counts) == {4096}
    assert np.array_equal(pixels[0], data)
    assert_off_block_ends(tif, offsets, counts)


@pytest.mark.parametrize(("shape", "dtype"), [((1024, 1024), "uint8"), ((3, 700, 512), "uint16")])
def test_strips_end_off_blocks(tmp_path: Path, shape: tuple[int, ...], dtype: str) -> None:
    """Strips of 1 MiB, 512 KiB and the rest of a plane: one after another, but for a few
    zeros before one that would end on a block."""
    data = (np.arange(np.prod(shape)) % 249).astype(dtype).reshape(shape)
    chunks = (1, 64, 64)[-len(shape):]
    zarr.create_array(tmp_path / "a.zarr", shape=shape, chunks=chunks, dtype=dtype)[...] = data
    tif = array_tiff(tmp_path / "a.zarr", strips=True)
    pixels, offsets, counts, _ = pieces(tif)
    assert np.array_equal(pixels.reshape(shape), data)
    assert_off_block_ends(tif, offsets, counts)


def test_a_bigtiff_ends_its_tiles_off_blocks(tmp_path: Path) -> None:
    """A sparse array of 4.4 GB (BigTIFF), tiles of 64 KiB, each of which would end on a block."""
    array = zarr.create_array(tmp_path / "a.zarr", shape=(66000, 66000), chunks=(256, 256), dtype="uint8",
                              fill_value=3)
    array[:256, :256] = 9
    tif = array_tiff(tmp_path / "a.zarr")
    assert tif.big
    with tifffile.TiffFile(io.BufferedReader(ViewReader(tif, 1 << 20), 1 << 16)) as tiff:
        page = tiff.pages[0]
        offsets = np.asarray(page.dataoffsets, np.int64)  # type: ignore[union-attr]
        counts = np.asarray(page.databytecounts, np.int64)  # type: ignore[union-attr]
    assert bytes(tif.read(int(offsets[0]), int(counts[0]))) == b"\x09" * (1 << 16)
    assert bytes(tif.read(int(offsets[-1]), int(counts[-1]))) == b"\x03" * (1 << 16)
    assert_off_block_ends(tif, offsets, counts, zeros=False)


def test_slots_laid_keep_every_end_off_blocks() -> None:
    """Slots of any number of pages for tiles of whole pages: no end on a block, at most one
    page in 16 of gaps, and spans that cover each slot once from its start."""
    for pages in range(1, 40):
        for filled in (1, 2, 3, 16, pages):
            slots = Slots.laid(pages * 4096, 200, min(filled, pages) * 4096)
            offsets = slots.offsets().values(0, 200).astype(np.int64)
            assert not np.any((offsets + slots.filled) % BLOCK == 0), (pages, filled)
            assert np.all(np.diff(offsets) >= pages * 4096) and offsets[0] % 4096 == 0
            assert slots.total <= 200 * pages * 4096 * 16 // 15 + BLOCK
            spans = list(slots.spans(0, slots.total))
            assert sum(count for *_, count in spans) == slots.total
            assert [inside for piece, inside, _ in spans if piece >= 0] == [0] * 200
            assert list(slots.offsets().part(150, 200).values(0, 50)) == list(offsets[150:])
