"""The registry (`store.sources.driver_for`) gives each backend family its driver, and a store
reads what it can do from that driver: its capabilities, one value (the layers above read
them, whether its writes are conditional among them). No server is reached: a filesystem is
made, never used."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import fsspec
import pytest
import s3fs
from fsspec.implementations.http import HTTPFileSystem
from fsspec.implementations.local import LocalFileSystem

from tests.helpers.gcs_server import GCS_ENV

# Before gcsfs is imported (it reads it once, at import): the GCS tests a worker runs after
# these talk to an emulator, which gcsfs's gRPC bucket checks would keep waiting.
os.environ.update(GCS_ENV)

import gcsfs

from zarrfs.errors import ReadOnlyError
from zarrfs.store import TEMP_PREFIX, ByteRange, Store
from zarrfs.store.base import BaseStore
from zarrfs.store.driver import Driver
from zarrfs.store.sources import driver_for
from zarrfs.store.versions import catalog_of

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
    assert local.capabilities.conditional and local.capabilities.versioned and not local.bounded
    remote = Store(s3fs.S3FileSystem(anon=True, skip_instance_cache=True), "bucket/array")
    assert remote.capabilities.batched_gets and remote.capabilities.round_trips
    assert remote.capabilities.conditional and remote.bounded
    served = Store(HTTPFileSystem(), "http://example.invalid/array")
    assert not served.capabilities.lists and not served.capabilities.conditional
    assert not served.capabilities.versioned
    assert driver_for(HTTPFileSystem(), "").capabilities.read_only


def test_any_other_filesystem_is_served_by_the_plain_driver() -> None:
    class Other(fsspec.AbstractFileSystem):
        protocol = "other"

    driver = driver_for(Other(), "")
    assert type(driver) is Driver
    assert driver.capabilities.round_trips and driver.capabilities.lists
    assert not driver.capabilities.conditional


def test_what_a_driver_can_do_is_its_capabilities_alone() -> None:
    # One value says it: no flag beside it, and batches a driver lacks are no operation.
    for flag in ("conditional", "reads_generations", "read_only", "commits", "batched_ranges",
                 "batched_objects", "bulk_deletes", "lists_prefixes"):
        assert not hasattr(Driver, flag), flag
    s3 = driver_for(s3fs.S3FileSystem(anon=True, skip_instance_cache=True), "bucket")
    assert s3.capabilities.bulk_deletes == 1000 and s3.capabilities.lists_prefixes
    batches = s3.batches()
    assert batches is not None and batches.ranges("bucket/k", [(0, 1), (2, 1)], lambda: None) is not None
    gcs = driver_for(gcsfs.GCSFileSystem(token="anon", skip_instance_cache=True), "bucket")
    assert gcs.capabilities.conditional and gcs.capabilities.lists_prefixes
    assert not gcs.capabilities.batched_gets and gcs.capabilities.bulk_deletes == 0
    assert gcs.batches() is None
    local = Store(LocalFileSystem(), "/nowhere")
    assert not local.capabilities.versions and catalog_of(local) is None


def test_what_one_family_does_is_a_facet_the_others_hand_out_as_none(tmp_path: Path) -> None:
    # The base contract holds what every store does; each family's own is a facet, or None.
    local = Store(LocalFileSystem(), str(tmp_path))
    files = local.local_files
    assert files is not None and files.writable() and files.room().f_bsize > 0
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "0").write_bytes(b"chunk")
    assert files.scanned(["c/0", "c/1"]) == {"c/0": local.stat("c/0")}  # (c/1: not stored)
    assert local.child("c").local_files is not None and local.cached_on_disk is None
    s3, gcs = s3fs.S3FileSystem(anon=True, skip_instance_cache=True), gcsfs.GCSFileSystem(token="anon")
    for fs in (fsspec.filesystem("memory"), HTTPFileSystem(), s3, gcs):
        store = Store(fs, "bucket/array")
        assert store.local_files is None and store.driver.versions() is None, fs
        assert store.cached_on_disk is None and catalog_of(store) is None, fs
    assert local.driver.batches() is None and driver_for(HTTPFileSystem(), "").batches() is None
    width = _methods(Driver)
    assert len(width) <= 25, width


def test_the_store_keeps_what_needs_its_state() -> None:
    # What needs nothing of a store but its operations is a module's functions of it (fetches,
    # many, prefixes): the store's own methods, over its two classes, stay about thirty.
    width = _methods(BaseStore) + _methods(Store)
    assert len(width) <= 30, width


def _methods(cls: type) -> list[str]:
    """The methods and properties `cls` itself defines (public and private)."""
    kinds = (property, classmethod, staticmethod)
    return [name for name, value in vars(cls).items() if callable(value) or isinstance(value, kinds)]


def test_a_zip_is_read_through_the_store_of_its_directory_whatever_its_driver() -> None:
    # The zip adapter over fsspec's memory filesystem, as over a local directory or S3: the
    # archive's bytes read through that store, its keys from the central directory.
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as written:
        written.writestr("zarr.json", b'{"zarr_format": 3, "node_type": "group"}')
        written.writestr("a/c/0", b"chunk")
    memory = fsspec.filesystem("memory")
    memory.pipe_file("/zips-adapter/g.zip", archive.getvalue())
    try:
        store = Store.open("memory://zips-adapter/g.zip")
        assert store.capabilities.read_only and store.read_only
        assert store.get("a/c/0") == b"chunk" and store.get("a/c/0", ByteRange(1, 3)) == b"hun"
        assert sorted(store.list()) == ["a/c/0", "zarr.json"]
        with pytest.raises(ReadOnlyError, match="zip mounts are read-only"):
            Store.open("memory://zips-adapter/g.zip", writable=True)
    finally:
        memory.rm("/zips-adapter", recursive=True)


def test_what_a_source_imports_late_is_named_not_imported() -> None:
    # A daemon acting as another user imports these first, as root: asking must import none.
    asked = ("import sys, zarrfs.store as s\n"
             "before = set(sys.modules)\n"
             "urls = ('gs://b/a.zarr', 'https://h/a.zarr', 's3://b/a.zip')\n"
             "late = [s.late_imports(u, s.SourceOptions()) for u in urls]\n"
             "print(sorted(set(sys.modules) - before))\n"
             "print(*(','.join(each.modules) for each in late))\n")
    done = subprocess.run([sys.executable, "-c", asked], capture_output=True, text=True, timeout=60,
                          check=True)
    imported, gcs, http, zipped = done.stdout.split()
    assert imported == "[]"
    assert gcs.split(",")[:2] == ["gcsfs", "gcsfs.retry"]
    assert http.split(",")[0] == "fsspec.implementations.http"
    assert {"s3fs", "encodings.cp437"} <= set(zipped.split(","))


def test_sizes_lists_every_key_through_the_driver_temporaries_included(tmp_path: Path) -> None:
    store = Store(LocalFileSystem(), str(tmp_path))
    store.put("c/0", b"four")
    (tmp_path / "c" / f"{TEMP_PREFIX}1-0-c").write_bytes(b"torn")
    assert store.sizes() == {"c/0": 4, f"c/{TEMP_PREFIX}1-0-c": 4}
    assert list(store.list()) == ["c/0"]
    assert Store(LocalFileSystem(), str(tmp_path / "none")).sizes() == {}
