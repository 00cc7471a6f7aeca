"""The registry (`store.sources.driver_for`) gives each backend family its driver, and a store
reads what it can do from that driver: the capabilities the layers above read, and whether
its writes are conditional. No server is reached: a filesystem is made, never used."""

from __future__ import annotations

from pathlib import Path

import fsspec
import gcsfs
import pytest
import s3fs
from fsspec.implementations.http import HTTPFileSystem
from fsspec.implementations.local import LocalFileSystem

from zarrfs.store import Store
from zarrfs.store.driver import Driver
from zarrfs.store.sources import driver_for

pytestmark = pytest.mark.fast


def test_each_family_has_its_driver() -> None:
    found = {name: type(driver_for(fs, "root")).__name__ for name, fs in {
        "local": LocalFileSystem(),
        "memory": fsspec.filesystem("memory"),
        "http": HTTPFileSystem(),
        "s3": s3fs.S3FileSystem(anon=True, skip_instance_cache=True),
        "gcs": gcsfs.GCSFileSystem(token="anon", skip_instance_cache=True),
    }.items()}
    assert found == {"local": "LocalDriver", "memory": "MemoryDriver", "http": "HttpDriver",
                     "s3": "S3Driver", "gcs": "GcsDriver"}


def test_a_store_states_what_its_driver_can_do(tmp_path: Path) -> None:
    local = Store(LocalFileSystem(), str(tmp_path))
    assert local.capabilities.local_files and not local.capabilities.round_trips
    assert local.conditional and local.versioned and not local.bounded
    remote = Store(s3fs.S3FileSystem(anon=True, skip_instance_cache=True), "bucket/array")
    assert remote.capabilities.batched_gets and remote.capabilities.round_trips
    assert remote.conditional and remote.bounded
    served = Store(HTTPFileSystem(), "http://example.invalid/array")
    assert not served.capabilities.lists and not served.conditional and not served.versioned
    assert driver_for(HTTPFileSystem(), "").read_only


def test_any_other_filesystem_is_served_by_the_plain_driver() -> None:
    class Other(fsspec.AbstractFileSystem):
        protocol = "other"

    driver = driver_for(Other(), "")
    assert type(driver) is Driver
    assert driver.capabilities.round_trips and driver.capabilities.lists and not driver.conditional
