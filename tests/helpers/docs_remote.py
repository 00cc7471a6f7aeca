"""Givens of the docs' remote examples (`tests/helpers/docs_givens.py`): the stores they name, served
by the test servers on 127.0.0.1, with the URLs the docs show substituted by theirs.

- `s3`: a moto server as AWS itself: its address is `AWS_ENDPOINT_URL` (what botocore and
  obstore take as the default endpoint) and replaces `https://minio.example.org:9000`; the
  buckets `climate` (`era5.zarr`, a group), `bucket` (`a.zarr`) and `public-bucket`
  (`array.zarr`); a profile `archive` in `AWS_SHARED_CREDENTIALS_FILE`.
- `gcs`: the GCS emulator as `STORAGE_EMULATOR_HOST`, bucket `bucket` holding `era5.zarr`.
- `azure`: Azurite as the account of `AZURE_STORAGE_CONNECTION_STRING` (which adlfs takes
  before an account name), container `container` holding `era5.zarr`.
- `http`: an HTTP server that lists nothing, as `https://example.org`: `image.ome.zarr`.
- `zips` (with `s3` and `http`): `cells.ome.zarr.zip` (an OME-Zarr image in a folder of the
  zip, deflated) in the working directory and in the bucket `bucket`, `image.ozx` (RFC-9) in
  the working directory, and `c.zip` (the same image) served over HTTP as `https://host`.
- `refs.json`: a kerchunk reference set of an HDF5 file, in the working directory.
- `icechunk`: an Icechunk repository at `/srv/repo` with a tag `v1`.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any
from unittest import mock

import zarr

from tests.helpers.docs_givens import given
from tests.helpers.docs_scratch import Scratch
from tests.helpers.s3_server import S3_ENV, S3Server, free_port, running


def _group(path: Path) -> Path:
    """A small group with an array `t2m`, as the remote examples mount."""
    group = zarr.open_group(path, mode="w")
    group.create_array("t2m", shape=(4, 19, 36), chunks=(1, 19, 36), dtype="float32")[...] = 280.0
    return path


def _array(path: Path) -> Path:
    """A 4 MiB float32 array of 256 KiB chunks."""
    zarr.create_array(path, shape=(1024, 1024), chunks=(256, 256), dtype="float32")[...] = 5
    return path


def _upload(client: Any, local: Path, bucket: str, prefix: str) -> None:
    for file in sorted(p for p in local.rglob("*") if p.is_file()):
        key = f"{prefix}/{file.relative_to(local).as_posix()}"
        client.put_object(Bucket=bucket, Key=key, Body=file.read_bytes())


@given("s3")
def _s3(machine: Scratch) -> None:
    import boto3

    machine.stack.enter_context(mock.patch.dict(os.environ, S3_ENV))
    server = machine.stack.enter_context(running(S3Server(free_port())))
    credentials = machine.root / "aws-credentials"
    credentials.write_text("[archive]\naws_access_key_id = testing\naws_secret_access_key = testing\n")
    machine.env.update(S3_ENV, AWS_ENDPOINT_URL=server.endpoint_url,
                       AWS_SHARED_CREDENTIALS_FILE=str(credentials))
    machine.urls["https://minio.example.org:9000"] = server.endpoint_url
    client = boto3.client("s3", endpoint_url=server.endpoint_url, region_name="us-east-1")
    staging = machine.root / "staging-s3"
    for bucket, prefix, make in (("climate", "era5.zarr", _group),
                                 ("bucket", "a.zarr", _array), ("public-bucket", "array.zarr", _array)):
        with contextlib.suppress(client.exceptions.BucketAlreadyOwnedByYou):
            client.create_bucket(Bucket=bucket)
        _upload(client, make(staging / bucket / prefix), bucket, prefix)
    client.put_bucket_policy(Bucket="public-bucket", Policy=json.dumps(PUBLIC_READ))


# A public bucket's policy. moto checks a HEAD against "s3:HeadObject" (AWS: s3:GetObject).
PUBLIC_READ = {"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Principal": "*", "Action": ["s3:GetObject", "s3:HeadObject", "s3:ListBucket"],
     "Resource": ["arn:aws:s3:::public-bucket", "arn:aws:s3:::public-bucket/*"]}]}


@given("gcs")
def _gcs(machine: Scratch) -> None:
    from tests.helpers.gcs_server import GCS_ENV, GCSServer

    machine.stack.enter_context(mock.patch.dict(os.environ, GCS_ENV))
    server = GCSServer(bucket="bucket")
    server.start()
    machine.stack.callback(server.stop)
    machine.env.update(GCS_ENV, STORAGE_EMULATOR_HOST=server.endpoint_url)
    import gcsfs

    remote = gcsfs.GCSFileSystem(**server.gcsfs_options())
    remote.put(str(_group(machine.root / "staging-gcs" / "era5.zarr")), "bucket/era5.zarr", recursive=True)


@given("azure")
def _azure(machine: Scratch) -> None:
    import adlfs

    from tests.helpers.azurite_server import AzuriteServer, azurite_command

    command = azurite_command()
    assert command is not None, "Azurite is not installed (scripts/install installs it with npm)"
    server = AzuriteServer(command, container="container")
    server.start()
    machine.stack.callback(server.stop)
    machine.env.update(AZURE_STORAGE_CONNECTION_STRING=server.connection_string)
    remote = adlfs.AzureBlobFileSystem(connection_string=server.connection_string, skip_instance_cache=True)
    staged = _group(machine.root / "staging-azure" / "era5.zarr")
    remote.put(str(staged), "container/era5.zarr", recursive=True)


@given("http")
def _http(machine: Scratch) -> None:
    from tests.helpers.http_server import serving

    served = machine.root / "served"
    image = zarr.open_group(served / "image.ome.zarr", mode="w", zarr_format=2)
    image.create_array("0", shape=(32, 32), chunks=(16, 16), dtype="uint8")[...] = 1
    axes = [{"name": n, "type": "space"} for n in "yx"]
    transforms = [{"type": "scale", "scale": [1.0, 1.0]}]
    multiscales: Any = [{"version": "0.4", "axes": axes,
                         "datasets": [{"path": "0", "coordinateTransformations": transforms}]}]
    image.attrs["multiscales"] = multiscales
    server = machine.stack.enter_context(serving(served))
    machine.urls["https://example.org"] = server.url


@given("zips", "s3", "http")
def _zips(machine: Scratch) -> None:
    import boto3

    from tests.helpers.zip_fixtures import ome_image, ozx, zipped_folder

    image = ome_image(machine.root / "staging-zip" / "cells.ome.zarr")
    cells = zipped_folder(image, machine.work / "cells.ome.zarr.zip", "zip")
    ozx(image, machine.work / "image.ozx")
    client = boto3.client("s3", endpoint_url=machine.env["AWS_ENDPOINT_URL"], region_name="us-east-1")
    client.put_object(Bucket="bucket", Key="cells.ome.zarr.zip", Body=cells.read_bytes())
    (machine.root / "served" / "c.zip").write_bytes(cells.read_bytes())
    machine.urls["https://host"] = machine.urls["https://example.org"]


@given("refs.json")
def _references(machine: Scratch) -> None:
    from tests.helpers.references_fixtures import kerchunk_references, write_hdf5, write_json

    h5 = machine.work / "data.h5"
    write_hdf5(h5)
    write_json(machine.work / "refs.json", kerchunk_references(h5))


@given("icechunk")
def _icechunk(machine: Scratch) -> None:
    from tests.helpers.icechunk_repos import create

    create(machine.path("/srv/repo"))

