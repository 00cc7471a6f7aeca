"""A disk-cached store of a real (moto) S3 server without a mount, for the tests of the disk
cache's restart (tests/store/disk_cache/test_disk_cache_rows.py, _early.py, _files.py): the
store opened on a cache directory, and one opened again on a cache that holds entries."""

from __future__ import annotations

from pathlib import Path

import fsspec

from tests.helpers.s3_server import S3Server
from tests.helpers.store_observers import Listings
from zarrfs.store import SourceOptions, Store
from zarrfs.store.disk_cache import DiskCachedStore, open_disk_cache


def opened(server: S3Server, url: str, cache: Path, observer: Listings | None = None,
           through: str | None = None) -> DiskCachedStore:
    """The store at `url` (reached through the proxy at `through`) with its disk cache."""
    client = {"endpoint_url": through, "region_name": "us-east-1"}
    reach = {} if through is None else {"client_kwargs": client}
    store = Store.open(url, SourceOptions(client=server.s3fs_options(**reach)), observer=observer)
    reads = open_disk_cache(store, url, SourceOptions(client=server.s3fs_options()), str(cache), 64 << 20)
    assert reads is not None
    return DiskCachedStore(store, reads)


def cached_then_reopened(server: S3Server, tmp_path: Path, name: str, stored: dict[str, bytes],
                         read: list[str], observer: Listings | None = None,
                         through: str | None = None) -> DiskCachedStore:
    """`stored` put below `name` on S3; `read` of them read through a disk cache; then the
    store opened again on that cache (its operations seen by `observer`; through `through`)."""
    fs = fsspec.filesystem("s3", **server.s3fs_options())
    for key, value in stored.items():
        fs.pipe_file(f"{server.bucket}/{name}/{key}", value)
    url, cache = f"s3://{server.bucket}/{name}", tmp_path / "cache"
    first = opened(server, url, cache)
    for key in read:
        assert first.read(key) is not None
    assert first.disk_cache is not None
    first.disk_cache.cache.close()
    return opened(server, url, cache, observer, through)
