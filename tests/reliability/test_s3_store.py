"""zarrfs over S3 (a moto server on 127.0.0.1): arrays written by zarr-python and TensorStore
read through Store and ZarrArray, zarrfs's writes read back by zarr-python, and what happens
when the server goes away and comes back."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers.faulty_fs import CONFIG_ENV, FaultyFileSystem, write_config
from tests.helpers.s3_server import S3Server
from zarrfs.array import ZarrArray
from zarrfs.array_metadata import create_array, open_array
from zarrfs.errors import StoreError
from zarrfs.formats.v3 import parse_metadata
from zarrfs.grid import Box
from zarrfs.store import ByteRange, RetryPolicy, SourceOptions, Store, SuffixRange

s3fs = pytest.importorskip("s3fs")

DEADLINE = 1.0  # how long an outage may take to become a StoreError
# While the server is up: every request of a store has the deadline as a whole, so a short one
# would fail requests that a busy machine answers slowly.
PATIENT = RetryPolicy(deadline_seconds=10.0, first_delay=0.05, max_delay=0.2)
SHORT = RetryPolicy(deadline_seconds=DEADLINE, first_delay=0.05, max_delay=0.2)
SHAPE = (20, 30)
VALUES = np.arange(600, dtype=np.float32).reshape(SHAPE) / 4
WHOLE = Box((0, 0), SHAPE)


def s3_store(server: S3Server, path: str) -> Store:
    fs = s3fs.S3FileSystem(**server.s3fs_options())
    # s3fs retries connection errors itself (5 tries, ~2 s of backoff) before zarrfs sees one;
    # one try keeps outage tests short and leaves the retrying to zarrfs's RetryPolicy.
    fs.retries = 1
    return Store(
        fs,
        f"{server.bucket}/{path}",
        retry=PATIENT,
    )


def write_with_zarr_python(server: S3Server, path: str) -> None:
    zarr = pytest.importorskip("zarr")
    array = zarr.create_array(
        store=f"s3://{server.bucket}/{path}",
        shape=SHAPE,
        chunks=(8, 8),
        dtype="float32",
        fill_value=0,
        compressors=zarr.codecs.ZstdCodec(level=1),
        storage_options={
            "endpoint_url": server.endpoint_url,
            "key": "testing",
            "secret": "testing",
        },
    )
    array[...] = VALUES


def write_with_tensorstore(server: S3Server, path: str) -> None:
    ts = pytest.importorskip("tensorstore")
    spec = {
        "driver": "zarr3",
        "kvstore": {
            "driver": "s3",
            "bucket": server.bucket,
            "path": f"{path}/",
            "endpoint": server.endpoint_url,
            "aws_region": "us-east-1",
            "aws_credentials": {"type": "environment"},
        },
        "metadata": {
            "shape": list(SHAPE),
            "data_type": "float32",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [8, 16]}},
            "codecs": [
                {
                    "name": "sharding_indexed",
                    "configuration": {
                        "chunk_shape": [4, 4],
                        "codecs": [
                            {"name": "bytes", "configuration": {"endian": "little"}},
                            {"name": "zstd", "configuration": {"level": 3}},
                        ],
                        "index_codecs": [
                            {"name": "bytes", "configuration": {"endian": "little"}},
                            {"name": "crc32c"},
                        ],
                    },
                }
            ],
        },
        "create": True,
        "delete_existing": True,
    }
    array = ts.open(spec).result()
    array[...] = VALUES
    # Leave one inner chunk region at the fill value, so a shard holds an empty entry.
    array[0:4, 0:4] = 0


@pytest.fixture
def opened() -> Iterator[list[ZarrArray]]:
    """Arrays a test opens, closed at its end."""
    arrays: list[ZarrArray] = []
    yield arrays
    for array in arrays:
        array.close()


def test_store_reads_what_zarr_python_wrote(s3_server: S3Server, opened: list[ZarrArray]) -> None:
    write_with_zarr_python(s3_server, "zp")
    store = s3_store(s3_server, "zp")
    raw = store.get("zarr.json")
    assert raw is not None and json.loads(raw)["shape"] == list(SHAPE)
    keys = set(store.list())
    assert keys == {"zarr.json"} | {f"c/{i}/{j}" for i in range(3) for j in range(4)}
    whole = store.get("c/1/2")
    assert whole is not None
    assert store.size("c/1/2") == len(whole)
    assert store.get("c/1/2", ByteRange(2, 5)) == whole[2:7]
    assert store.get("c/1/2", SuffixRange(6)) == whole[-6:]
    assert store.get("c/9/9") is None and store.size("c/9/9") is None

    array = open_array(store, threads=2)
    opened.append(array)
    assert np.array_equal(array.read(WHOLE), VALUES)
    assert np.array_equal(array.read(Box((3, 5), (17, 29))), VALUES[3:17, 5:29])


def test_zarr_array_reads_what_tensorstore_wrote(
    s3_server: S3Server, opened: list[ZarrArray]
) -> None:
    write_with_tensorstore(s3_server, "ts")
    array = open_array(s3_store(s3_server, "ts"), threads=2)
    opened.append(array)
    expected = VALUES.copy()
    expected[0:4, 0:4] = 0
    assert np.array_equal(array.read(WHOLE), expected)
    assert np.array_equal(array.read(Box((5, 7), (6, 29))), expected[5:6, 7:29])


def test_zarr_python_reads_what_zarrfs_wrote(s3_server: S3Server, opened: list[ZarrArray]) -> None:
    zarr = pytest.importorskip("zarr")
    doc = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": list(SHAPE),
        "data_type": "float32",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [10, 10]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0.0,
        "attributes": {},
        "codecs": [
            {
                "name": "sharding_indexed",
                "configuration": {
                    "chunk_shape": [5, 5],
                    "codecs": [
                        {"name": "bytes", "configuration": {"endian": "little"}},
                        {"name": "gzip", "configuration": {"level": 1}},
                    ],
                    "index_codecs": [
                        {"name": "bytes", "configuration": {"endian": "little"}},
                        {"name": "crc32c"},
                    ],
                },
            }
        ],
    }
    array = create_array(s3_store(s3_server, "zf"), parse_metadata(json.dumps(doc)), threads=2)
    opened.append(array)
    array.write(WHOLE, VALUES)
    array.write(Box((0, 0), (5, 5)), np.zeros((5, 5), np.float32))  # an empty inner chunk
    array.flush()
    expected = VALUES.copy()
    expected[:5, :5] = 0
    back = zarr.open_array(
        f"s3://{s3_server.bucket}/zf",
        mode="r",
        storage_options={
            "endpoint_url": s3_server.endpoint_url,
            "key": "testing",
            "secret": "testing",
        },
    )
    assert np.array_equal(back[...], expected)


def outage_setup(server: S3Server, opened: list[ZarrArray]) -> tuple[Store, ZarrArray]:
    write_with_zarr_python(server, "zp")
    store = s3_store(server, "zp")
    array = open_array(store, threads=2, cache_bytes=0)
    opened.append(array)
    assert np.array_equal(array.read(Box((0, 0), (8, 8))), VALUES[:8, :8])
    return store, array


def test_server_outage_is_a_store_error_within_the_deadline(
    s3_server: S3Server, opened: list[ZarrArray]
) -> None:
    store, array = outage_setup(s3_server, opened)
    s3_server.stop()
    store.retry = SHORT
    problems = []
    for name, call in [
        ("ZarrArray.read", lambda: array.read(WHOLE)),
        ("Store.get", lambda: store.get("c/0/0")),
        ("Store.size", lambda: store.size("c/0/0")),
        ("Store.list", lambda: list(store.list())),
        ("Store.put", lambda: store.put("c/0/0", b"x")),
    ]:
        began = time.monotonic()
        try:
            call()
        except StoreError:
            pass
        except Exception as e:
            problems.append(
                f"{name}: {type(e).__module__}.{type(e).__name__} instead of StoreError"
            )
        else:
            problems.append(f"{name}: succeeded with the server down")
        took = time.monotonic() - began
        if took > DEADLINE + 5:
            problems.append(f"{name}: took {took:.1f}s to give up")
    assert not problems, "\n".join(problems)


def test_recovery_after_the_server_restarts(s3_server: S3Server, opened: list[ZarrArray]) -> None:
    store, array = outage_setup(s3_server, opened)
    s3_server.stop()
    store.retry = SHORT
    with pytest.raises(StoreError):
        array.read(WHOLE)
    s3_server.start()  # the same port; moto kept the objects
    store.retry = PATIENT
    assert np.array_equal(array.read(WHOLE), VALUES)
    assert store.get("c/0/0") is not None
    store.put("extra", b"x")
    assert store.get("extra") == b"x"


def test_put_to_a_missing_bucket_is_an_error(s3_server: S3Server) -> None:
    fs = s3fs.S3FileSystem(**s3_server.s3fs_options())
    store = Store(fs, "no-such-bucket/array", retry=RetryPolicy(deadline_seconds=DEADLINE))
    with pytest.raises(StoreError):
        store.put("c/0/0", b"data that must not vanish")


def test_faulty_s3_chain_retries_injected_faults(
    s3_server: S3Server, opened: list[ZarrArray], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`faulty::s3://...` as a mount would open it: S3 underneath, faults from the config."""
    write_with_zarr_python(s3_server, "zp")
    config = tmp_path / "faults.json"
    write_config(
        str(config),
        [
            {
                "name": "flaky",
                "methods": ["cat_file"],
                "pattern": "*/c/*",
                "times": 4,
                "exception": "ConnectionError",
                "errno": "ECONNRESET",
            }
        ],
    )
    monkeypatch.setenv(CONFIG_ENV, str(config))
    options: dict[str, Any] = {"s3": s3_server.s3fs_options()}
    store = Store.open(f"faulty::s3://{s3_server.bucket}/zp", SourceOptions(client=options), read_only=True)
    assert isinstance(store.driver.fs, FaultyFileSystem)
    array = open_array(store, threads=2)
    opened.append(array)
    assert np.array_equal(array.read(WHOLE), VALUES)
    assert store.driver.fs.faults["flaky"] == 4
