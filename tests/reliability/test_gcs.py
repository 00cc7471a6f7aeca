"""GCS (`gs://`, gcsfs) as a compare-and-swap store, against gcp-storage-emulator on 127.0.0.1
(`gcs_server`: the emulator plus the generation preconditions and the `x-goog-generation`
header real GCS has and it lacks; the first test checks those additions with raw requests).

Store level: a put or delete whose expected generation (None: absent) no longer holds raises
ConflictError and changes nothing, and reads report the generation puts return, whether the
server sends `x-goog-generation` or not. Through real mounts (`-o endpoint_url=`): a v3 array
zarr-python wrote reads back equal; a write through the mount is what zarr-python then reads;
two mounts writing different elements of one chunk, each holding a stale copy, lose no update
(each write-back after the first conflicts and merges); and `-o anon` reads with no credentials
even where the environment names some (GOOGLE_APPLICATION_CREDENTIALS).
"""

from __future__ import annotations

import contextlib
import json
import os
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers.gcs_server import GCS_ENV, GCSServer, running

os.environ.update(GCS_ENV)  # before gcsfs is imported (it reads it once, at import)

import gcsfs
import zarr
from zarr.codecs import ZstdCodec

from tests.helpers.mounting import Mount
from tests.helpers.store_conformance import assert_compare_and_swap, write_in_rounds, write_row_and_block
from tests.helpers.two_writers import Writer, lost
from zarrfs.store import Store

SHAPE = (64, 48)
CHUNKS = (16, 16)
VALUES = np.arange(SHAPE[0] * SHAPE[1], dtype="<f4").reshape(SHAPE) / 4 - 100
ROUNDS = 12


@pytest.fixture
def gcs_server() -> Iterator[GCSServer]:
    with running() as server:
        yield server


@pytest.fixture(params=["x-goog-generation", "no generation header"])
def gcs_store(request: pytest.FixtureRequest) -> Iterator[Store]:
    with running(generation_header=request.param == "x-goog-generation") as server:
        yield Store(gcsfs.GCSFileSystem(**server.gcsfs_options()), f"{server.bucket}/cas")


def raw(server: GCSServer, method: str, path: str, data: bytes | None = None) -> tuple[int, Any, bytes]:
    request = urllib.request.Request(server.endpoint_url + path, data=data, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def test_fixture_server_honours_preconditions_and_reports_generations(gcs_server: GCSServer) -> None:
    upload = f"/upload/storage/v1/b/{gcs_server.bucket}/o?uploadType=media&name=k"
    status, _, body = raw(gcs_server, "POST", upload + "&ifGenerationMatch=0", b"one")
    assert status == 200
    first = json.loads(body)["generation"]
    assert raw(gcs_server, "POST", upload + "&ifGenerationMatch=0", b"two")[0] == 412
    assert raw(gcs_server, "POST", upload + "&ifGenerationMatch=1", b"two")[0] == 412
    download = f"/download/storage/v1/b/{gcs_server.bucket}/o/k?alt=media"
    status, headers, body = raw(gcs_server, "GET", download)
    assert (status, body, headers["x-goog-generation"]) == (200, b"one", first)
    status, _, body = raw(gcs_server, "POST", upload + f"&ifGenerationMatch={first}", b"two")
    second = json.loads(body)["generation"]
    assert status == 200 and second != first
    objects = f"/storage/v1/b/{gcs_server.bucket}/o/k"
    assert raw(gcs_server, "DELETE", objects + f"?ifGenerationMatch={first}")[0] == 412
    assert raw(gcs_server, "GET", objects)[0] == 200
    assert raw(gcs_server, "DELETE", objects + f"?ifGenerationMatch={second}")[0] in (200, 204)
    assert raw(gcs_server, "GET", objects)[0] == 404


def test_store_compare_and_swap(gcs_store: Store) -> None:
    assert_compare_and_swap(gcs_store)


def create_array(server: GCSServer, chunks: tuple[int, int] = CHUNKS) -> Any:
    array = zarr.create_array(
        store=f"gs://{server.bucket}/array", shape=SHAPE, chunks=chunks, dtype="<f4",
        fill_value=0, compressors=ZstdCodec(level=1),
        storage_options=server.gcsfs_options())
    array[...] = VALUES
    return array


def read_zarr_python(server: GCSServer) -> np.ndarray:
    array = zarr.open_array(f"gs://{server.bucket}/array", mode="r",
                            storage_options=server.gcsfs_options())
    return np.asarray(array[...])


def mount_options(server: GCSServer, *extra: str) -> list[str]:
    return [f"endpoint_url={server.endpoint_url}", "direct_io", *extra]


def test_mount_reads_and_writes_an_array_on_gcs(gcs_server: GCSServer, mount_array: Any) -> None:
    create_array(gcs_server)
    mount: Mount = mount_array(f"gs://{gcs_server.bucket}/array", mount_options(gcs_server))
    data = np.frombuffer(mount.data.read_bytes(), "<f4").reshape(SHAPE)
    assert np.array_equal(data, VALUES)

    expected = write_row_and_block(mount.data, VALUES)
    assert np.array_equal(read_zarr_python(gcs_server), expected)
    assert mount.unmount() == 0, mount.log()
    assert "Traceback" not in mount.log(), mount.log()


def test_two_mounts_lose_no_update(gcs_server: GCSServer, mount_array: Any) -> None:
    """Each round both mounts read everything (caching chunk (0, 0)), then A writes rows 0-3
    of it and B rows 4-7, each fsyncing: B's copy is stale, so its put must fail on the
    generation and merge its elements into A's chunk."""
    create_array(gcs_server, chunks=(8, 8))
    source = f"gs://{gcs_server.bucket}/array"
    options = mount_options(gcs_server, "cache=16M")
    a = Writer("A", mount_array(source, options)).open()
    b = Writer("B", mount_array(source, options)).open()
    expected, conflicts = write_in_rounds(a, b, VALUES, ROUNDS)
    for writer in (a, b):
        assert writer.mount.unmount() == 0, writer.mount.log()
    stored = read_zarr_python(gcs_server)
    assert lost(stored, expected) == 0, (stored[:8, :8], expected[:8, :8])
    assert conflicts >= 2 * ROUNDS - 2, conflicts  # every write-back but the first


def test_anon_reads_without_the_credentials_the_environment_names(
        gcs_server: GCSServer, mount_array: Any, tmp_path: Path) -> None:
    create_array(gcs_server)
    # Credentials that cannot be used here (refreshing them needs Google's OAuth server):
    # without `anon`, gcsfs would take them.
    credentials = tmp_path / "credentials.json"
    credentials.write_text(json.dumps({"type": "authorized_user", "client_id": "zarrfs-test",
                                       "client_secret": "none", "refresh_token": "none"}))
    env = {"GOOGLE_APPLICATION_CREDENTIALS": str(credentials)}
    with patched_environ(env):
        chosen = gcsfs.GCSFileSystem(endpoint_url=gcs_server.endpoint_url, skip_instance_cache=True)
        assert chosen.credentials.method == "google_default"
    mount: Mount = mount_array(f"gs://{gcs_server.bucket}/array",
                               mount_options(gcs_server, "anon", "ro"), env=env)
    data = np.frombuffer(mount.data.read_bytes(), "<f4").reshape(SHAPE)
    assert np.array_equal(data, VALUES)


@contextlib.contextmanager
def patched_environ(values: dict[str, str]) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        for name, value in values.items():
            patch.setenv(name, value)
        yield
