"""A zip on GCS (`gs://`, gcsfs) mounts read-only, read by byte ranges as on S3 (issue 41,
item 1), against gcp-storage-emulator on 127.0.0.1."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tests.helpers.gcs_server import GCS_ENV, GCSServer, running

os.environ.update(GCS_ENV)  # before gcsfs is imported (it reads it once, at import)

import gcsfs

from tests.helpers.zip_fixtures import assert_group_matches, open_zipped, zipstore_group


def test_a_zipstore_zip_on_gcs_mounts_and_reads_as_zarr_python_reads_it(tmp_path: Path,
                                                                       mount_array: Any) -> None:
    zipped = zipstore_group(tmp_path / "cells.zarr.zip", zarr_format=3)
    server: GCSServer
    with running() as server:
        fs = gcsfs.GCSFileSystem(**server.gcsfs_options())
        fs.pipe(f"{server.bucket}/images/cells.zarr.zip", zipped.read_bytes())
        m = mount_array(f"gs://{server.bucket}/images/cells.zarr.zip",
                        [f"endpoint_url={server.endpoint_url}", "direct_io"])
        assert_group_matches(m.path, open_zipped(zipped))
        m.unmount()
