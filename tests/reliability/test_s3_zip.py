"""Remote zips are read by byte ranges (issue 41, item 1): a 16,384-entry zip on S3 behind a
20 ms round trip mounts and answers two small reads (each widened by the kernel across a row
of 128 chunks) with a few dozen requests at most (the daemon's request log), fetching a small
part of the zip (the bytes the proxy passed); the same by HTTP, whose server must be asked for
ranges, and through fsspec's `zip::URL` form."""

from __future__ import annotations

import os
from pathlib import Path

import fsspec
import numpy as np
import zarr
from zarr.storage import ZipStore

from tests.helpers.http_server import serving as serving_http
from tests.helpers.mounting import mounted, pread
from tests.helpers.netproxy import proxied
from tests.helpers.s3_server import S3Server
from tests.helpers.scale_arrays import RequestLog, Requests
from tests.helpers.zip_fixtures import ome_image, open_zipped, zipped_folder

GRID, CHUNK = (128, 128), (32, 32)  # 16,384 chunks, each its own entry of 2 KiB
SHAPE = (GRID[0] * CHUNK[0], GRID[1] * CHUNK[1])
ROUND_TRIP = 0.02
FEW_DOZEN = 36


def big_zip(path: Path) -> np.ndarray:
    """A zarr-python ZipStore of 16,384 uncompressed chunks (about 35 MB); its values."""
    values = (np.arange(SHAPE[0] * SHAPE[1], dtype="uint32") * 2654435761 % 65521).astype("uint16")
    values = values.reshape(SHAPE)
    store = ZipStore(path, mode="w")
    array = zarr.create_array(store, shape=SHAPE, chunks=CHUNK, dtype="uint16", compressors=None)
    array[:] = values
    store.close()
    return values


def test_a_16384_entry_zip_on_s3_costs_a_few_dozen_requests(s3_server: S3Server, tmp_path: Path) -> None:
    local = tmp_path / "big.zarr.zip"
    expected = big_zip(local)
    fs = fsspec.filesystem("s3", **s3_server.s3fs_options())
    fs.put(str(local), f"{s3_server.bucket}/big.zarr.zip")
    size = os.path.getsize(local)
    log = RequestLog(tmp_path / "requests.log")
    with proxied(s3_server.port, delay=ROUND_TRIP / 2) as proxy, \
            mounted(f"s3://{s3_server.bucket}/big.zarr.zip", tmp_path / "mnt",
                    # (the kernel widens each read to a chunk row's 128 chunks: zip_spans)
                    [f"endpoint_url={proxy.url}"], env=log.env) as m:
        opened = log.take()
        assert opened.listed() == 0 and 0 < opened.count() <= 8, opened.summary()
        assert len(os.listdir(m.path / "chunks" / "c")) == GRID[0]  # (the central directory's)
        reads = []
        for row, column in ((100, 200), (3000, 4000)):
            offset = (row * SHAPE[1] + column) * 2
            reads.append(np.frombuffer(pread(m.data, 64, offset), dtype="<u2"))
            assert np.array_equal(reads[-1], expected[row, column : column + 32])
        # (measured: the mount 4 requests, with the two reads 6 to 8, each read a chunk row's
        # 128 entries in one or two spans; 1.7 MB of 35 MB fetched, 0.8 MB the central
        # directory. Before zip_spans: 131 requests.)
        both = Requests([*opened, *log.take()])
        assert both.listed() == 0 and both.count() <= FEW_DOZEN, both.summary()
        assert all(r.key.endswith("big.zarr.zip") for r in both)  # (one object, by ranges)
        assert proxy.downloaded < size // 10, (proxy.downloaded, size)


def test_a_zip_over_http_is_read_by_ranges(tmp_path: Path) -> None:
    image = ome_image(tmp_path / "source" / "cells.ome.zarr")
    noise = zarr.open_group(image, mode="a").create_array(  # (4 MiB no read here asks for)
        "noise", shape=(2048, 2048), chunks=(256, 256), dtype="uint8", compressors=None)
    noise[:] = np.random.default_rng(0).integers(0, 256, (2048, 2048), dtype="uint8")
    served = tmp_path / "served"
    served.mkdir()
    zipped = zipped_folder(image, served / "cells.ome.zarr.zip", "zip")
    size = os.path.getsize(zipped)
    oracle = open_zipped(zipped, "cells.ome.zarr")
    with serving_http(served) as server, proxied(int(server.url.rsplit(":", 1)[1])) as proxy:
        for source in (f"{proxy.url}/cells.ome.zarr.zip", f"zip::{proxy.url}/cells.ome.zarr.zip"):
            before = proxy.downloaded
            with mounted(source, tmp_path / "mnt") as m:
                # (read_bytes lets go of the GIL while it waits, np.fromfile does not: the
                # server answering the mount's requests runs in this process)
                level = np.frombuffer((m.path / "1" / "data").read_bytes(), "uint8")
                level = level.reshape(oracle["1"].shape)
                assert np.array_equal(level, oracle["1"][...])
            assert proxy.downloaded - before < size // 8, (proxy.downloaded - before, size)
        assert all(method in ("GET", "HEAD") for method, _ in server.requests)
