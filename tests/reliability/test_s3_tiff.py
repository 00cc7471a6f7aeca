"""data.tif of arrays in S3 (a local moto server): tiles located from the listing (plain) or
the shard indexes (sharded), handed out as stored, each tile read costing that tile."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numcodecs
import numpy as np
import pytest
import tifffile
import zarr
from mounting import mounted

from tests.reliability.s3_server import S3Server


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
    options = [f"endpoint_url={s3_server.endpoint_url}", "ro"]
    with mounted(f"s3://{s3_server.bucket}/image", tmp_path / "mnt", options) as mount:
        tif = mount.path / "data.tif"
        with tifffile.TiffFile(tif) as tiff:
            page = tiff.pages[0]
            assert page.compression == 50000 and (page.tilelength, page.tilewidth) == (64, 128)
            offsets, counts = page.dataoffsets, page.databytecounts
        tile = 2 * 4 + 3  # rows 128..191, columns 384..511
        fd = os.open(tif, os.O_RDONLY)  # (an open lists the shards again: close-to-open)
        try:
            before = stats(mount.path)["bytes_fetched"]
            encoded = os.pread(fd, counts[tile], offsets[tile])
            assert stats(mount.path)["bytes_fetched"] - before == counts[tile]
        finally:
            os.close(fd)
        tile_values = np.frombuffer(numcodecs.Zstd().decode(encoded), "<u2")
        assert np.array_equal(tile_values.reshape(64, 128)[:, :116], values[128:192, 384:500])
        assert np.array_equal(tifffile.imread(tif), values)
        assert stats(mount.path)["chunks_decoded"] == 0


def stats(mountpoint: Path) -> dict[str, float]:
    out = subprocess.run(["zarrfs", "stats", "--json", str(mountpoint)], check=True, capture_output=True,
                         text=True).stdout
    return dict(json.loads(out))
