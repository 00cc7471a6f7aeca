"""data.tif of arrays in S3 (a local moto server), mounted with `-o filters=plugins`: zstd tiles
handed out as stored (a chunk's object, or an inner chunk where its shard's index says), their
byte counts learned as the tables are read (a listing of each row of chunks, or a HEAD each),
each tile read then costing that tile: one request to the server, a GET of its object (counted
by the server). A default mount serves them decoded: tests/views/tiff/test_tiff_readers.py."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numcodecs
import numpy as np
import pytest
import tifffile
import zarr

from tests.helpers.logged_s3 import LoggedS3Server
from tests.helpers.mounting import mount_stats as stats
from tests.helpers.mounting import mounted
from tests.helpers.s3_server import S3Server, free_port, serving


def written(server: S3Server, name: str, sharded: bool) -> np.ndarray:
    values = np.random.default_rng(7).integers(0, 60000, (300, 500)).astype("<u2")
    values[:64, :128] = 0  # a chunk of fill values: not stored
    chunks = {"shards": (128, 256), "chunks": (64, 128)} if sharded else {"chunks": (64, 128)}
    options = {"endpoint_url": server.endpoint_url, "key": "testing", "secret": "testing"}
    zstd = zarr.codecs.ZstdCodec(level=1)
    array = zarr.create_array(store=f"s3://{server.bucket}/{name}", shape=values.shape, dtype="<u2",
                              fill_value=0, compressors=zstd, storage_options=options, **chunks)
    array[...] = values
    return values


@pytest.mark.parametrize("sharded", [False, True], ids=["plain", "sharded"])
def test_tiles_as_stored_from_s3(s3_server: S3Server, tmp_path: Path, sharded: bool) -> None:
    values = written(s3_server, "image", sharded)
    options = [f"endpoint_url={s3_server.endpoint_url}", "ro", "filters=plugins"]
    with mounted(f"s3://{s3_server.bucket}/image", tmp_path / "mnt", options) as mount:
        tif = mount.path / "data.tif"
        with tifffile.TiffFile(tif) as tiff:
            page = tiff.pages[0]
            assert page.compression == 50000 and (page.tilelength, page.tilewidth) == (64, 128)
            offsets, counts = page.dataoffsets, page.databytecounts
        tile = 2 * 4 + 3  # rows 128..191, columns 384..511
        fd = os.open(tif, os.O_RDONLY)
        try:
            before = stats(mount.path)["bytes_fetched"]
            encoded = os.pread(fd, counts[tile], offsets[tile])
            # (a tile is its stored bytes and nothing more; a shard's index was read with the tables)
            assert stats(mount.path)["bytes_fetched"] - before == len(encoded) == counts[tile]
        finally:
            os.close(fd)
        tile_values = np.frombuffer(numcodecs.Zstd().decode(encoded), "<u2")
        assert np.array_equal(tile_values.reshape(64, 128)[:, :116], values[128:192, 384:500])
        assert np.array_equal(tifffile.imread(tif), values)
        assert stats(mount.path)["chunks_decoded"] == 0


@pytest.fixture
def logged_s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[LoggedS3Server]:
    yield from serving(LoggedS3Server(free_port()), monkeypatch)


def test_a_tile_read_is_one_get_of_its_object(logged_s3: LoggedS3Server, tmp_path: Path) -> None:
    """Tiles of 64 KiB and more (each in a slot of its own) read through data.tif: one request
    each to the server, a GET of the tile's object, and nothing else (no HEAD, no listing)."""
    values = np.random.default_rng(3).integers(0, 60000, (512, 768)).astype("<u2")
    options = {"endpoint_url": logged_s3.endpoint_url, "key": "testing", "secret": "testing"}
    zarr.create_array(store=f"s3://{logged_s3.bucket}/big", shape=values.shape, dtype="<u2",
                      chunks=(256, 256), compressors=zarr.codecs.ZstdCodec(level=1),
                      storage_options=options)[...] = values
    with mounted(f"s3://{logged_s3.bucket}/big", tmp_path / "mnt",
                 [f"endpoint_url={logged_s3.endpoint_url}", "ro", "filters=plugins"]) as mount:
        tif = mount.path / "data.tif"
        with tifffile.TiffFile(tif) as tiff:
            offsets, counts = tiff.pages[0].dataoffsets, tiff.pages[0].databytecounts  # type: ignore[union-attr]
        assert min(counts) > 64 << 10
        fd = os.open(tif, os.O_RDONLY)
        try:
            assert logged_s3.log is not None
            logged_s3.log.take()
            tiles = {4: (1, 1), 1: (0, 1), 5: (1, 2)}  # tile -> its chunk (3 tiles a row)
            read = {tile: os.pread(fd, counts[tile], offsets[tile]) for tile in tiles}
            requests = logged_s3.log.take()
        finally:
            os.close(fd)
    assert [(r.method, r.key, r.status) for r in requests] == [
        ("GET", f"big/c/{row}/{column}", 200) for row, column in tiles.values()]
    tile = np.frombuffer(numcodecs.Zstd().decode(read[5]), "<u2").reshape(256, 256)
    assert np.array_equal(tile, values[256:, 512:])
