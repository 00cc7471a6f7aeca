"""A stream (a sequential reader's slab) over a warm disk cache after a restart, against a
real (moto) S3 server reached through a proxy that can silence it: the chunks are decoded
while the listing that checks them is in flight, and the slab is finished only when the
listing answers, with the chunk another writer changed read again (`Store.confirm`)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers.disk_cache_stores import opened
from tests.helpers.mounting import wait_until
from tests.helpers.netproxy import proxied
from tests.helpers.s3_server import S3Server, free_port, serving
from tests.helpers.store_observers import Listings
from zarrfs.array import ZarrArray
from zarrfs.array_metadata import create_array, open_array
from zarrfs.formats.v3 import metadata_from_json
from zarrfs.grid import Box
from zarrfs.store import SourceOptions, Store
from zarrfs.store.disk_cache import freshness as disk_cache_freshness

SHAPE, CHUNK = (64, 256), (16, 64)  # 4 x 4 chunks: one listing checks them all
GRID = (SHAPE[0] // CHUNK[0], SHAPE[1] // CHUNK[1])
VALUES = (np.arange(np.prod(SHAPE), dtype="<u2").reshape(SHAPE) % 1000) + 1


@pytest.fixture
def s3_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[S3Server]:
    yield from serving(S3Server(free_port()), monkeypatch)


def _doc() -> dict[str, Any]:
    return {
        "zarr_format": 3, "node_type": "array", "shape": list(SHAPE), "data_type": "uint16",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(CHUNK)}},
        "chunk_key_encoding": {"name": "default"}, "fill_value": 0,
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                   {"name": "zstd", "configuration": {"level": 1}}],
    }


def _streamed(array: ZarrArray) -> np.ndarray:
    stream = array.stream(Box((0, 0), SHAPE))
    assert stream is not None and stream.wait(), stream and stream.error
    assert stream.out is not None
    out = stream.out.copy()
    stream.close()
    return out


def test_a_stream_decodes_ahead_of_the_check_and_serves_only_what_it_confirms(
        s3_server: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # (The check waits for the store as long as the test needs, however loaded the machine:
    # past its usual 2 s, the cache would serve what it holds unchecked, by design.)
    monkeypatch.setattr(disk_cache_freshness, "CHECK_SECONDS", 60.0)
    url, cache = f"s3://{s3_server.bucket}/early", tmp_path / "cache"
    writer = create_array(Store.open(url, SourceOptions(client=s3_server.s3fs_options())),
                          metadata_from_json(_doc()), threads=2)
    writer.write(Box((0, 0), SHAPE), VALUES)
    writer.flush()
    first = open_array(opened(s3_server, url, cache), threads=2)
    assert (_streamed(first) == VALUES).all()  # (every chunk now in the disk cache)
    first.close()
    changed = VALUES.copy()
    changed[16:32, 128:192] = 7  # chunk (1, 2), by another writer after the restart
    writer.write(Box((16, 128), (32, 192)), changed[16:32, 128:192])
    writer.flush()
    seen = Listings()
    with proxied(s3_server.port) as proxy:
        store = opened(s3_server, url, cache, seen, proxy.url)
        array = open_array(store, threads=2)
        reads = store.disk_cache
        assert reads is not None
        proxy.swallow()
        before = seen.begun  # (the requests that opened the array)
        array.recheck()  # (an open: the listing that checks the cached chunks begins, and hangs)
        wait_until(lambda: seen.begun > before, 20, "the listing began")
        got: list[np.ndarray] = []
        reader = threading.Thread(target=lambda: got.append(_streamed(array)))
        reader.start()
        wait_until(lambda: reads.cache.hits >= GRID[0] * GRID[1], 20, "every chunk read from the disk cache")
        reader.join(0.2)
        assert reader.is_alive() and not got, "the stream finished before its chunks were confirmed"
        proxy.heal()
        reader.join(30)
        array.close()
    assert got and (got[0] == changed).all()
    assert reads.cache.misses == 1  # (the changed chunk, read again)
