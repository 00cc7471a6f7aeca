"""`data.h5` through real mounts, read by readers of HDF5 1.8's format
(tests/helpers/old_hdf5_readers.py): one array over S3, and one chunk (stored, and never
written) of an array of 10^6 chunks read by HDF5 1.8."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import fsspec
import numpy as np
import pytest
import zarr
import zarr.codecs.numcodecs

from tests.helpers.mounting import mounted
from tests.helpers.old_hdf5_readers import READERS, Expected, as_held, assert_reads, codecs, run_reader
from tests.helpers.s3_server import S3Server, free_port, serving
from tests.helpers.scale_arrays import ZLIB, write_twin

pytestmark = [pytest.mark.filterwarnings("ignore::UserWarning"),
              pytest.mark.filterwarnings("ignore::zarr.errors.UnstableSpecificationWarning")]


# -- over S3 --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def s3_mount(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """An array of chunks passed through (shuffle + zlib, some never written) on a moto S3
    server, mounted; (its local twin, the mount)."""
    root = tmp_path_factory.mktemp("old_readers_s3")
    data = np.random.default_rng(3).integers(-1000, 1000, (50, 40)).astype("int32")
    data[32:, :] = -1
    array = zarr.create_array(root / "a.zarr", shape=data.shape, dtype="int32", chunks=(16, 16),
                              fill_value=-1, dimension_names=["y", "x"], **codecs(3, "shuffle:4", "zlib"))
    array[...] = data
    with pytest.MonkeyPatch.context() as patch, \
            contextlib.closing(serving(S3Server(free_port()), patch)) as servers:
        server = next(servers)
        s3 = fsspec.filesystem("s3", **server.uploading_options())
        s3.put(str(root / "a.zarr"), f"{server.bucket}/a.zarr", recursive=True)
        options = ["ro", f"endpoint_url={server.endpoint_url}"]
        with mounted(f"s3://{server.bucket}/a.zarr", root / "mnt", options) as mount:
            yield root / "a.zarr", mount.path


@pytest.mark.parametrize("reader", READERS)
def test_reads_over_s3(s3_mount: tuple[Path, Path], tmp_path: Path, reader: str) -> None:
    store, mount = s3_mount
    values, kind = as_held(np.asarray(zarr.open_array(store, mode="r")[...]))
    assert_reads(reader, mount / "data.h5", {"data": Expected(values, kind)}, tmp_path / "reading.json")


# -- at scale -------------------------------------------------------------------------------

TWIN_CHUNK = (16, 16)
TWIN_STORED = [(0, 0), (500, 700), (999, 999)]


@pytest.fixture(scope="module")
def million(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """The array of 10^6 chunks, mounted read-only: (its store, the mount)."""
    root = tmp_path_factory.mktemp("old_readers_million")
    store = write_twin(root / "huge.zarr", (1000, 1000), TWIN_CHUNK, stored=TWIN_STORED, compression=ZLIB)
    with mounted(store, root / "mnt", ["ro"]) as mount:
        yield store, mount.path


@pytest.mark.parametrize("chunk", [(500, 700), (500, 701)], ids=["stored", "never-written"])
def test_hdf5_1_8_reads_a_chunk_of_a_million(million: tuple[Path, Path], tmp_path: Path,
                                             chunk: tuple[int, int]) -> None:
    """One chunk of an array of 10^6 chunks (three stored) through HDF5 1.8: the values
    zarr-python reads, a chunk never written as the fill value."""
    store, mount = million
    region = tuple(slice(c * n, (c + 1) * n) for c, n in zip(chunk, TWIN_CHUNK, strict=True))
    wanted = np.asarray(zarr.open_array(store, mode="r")[region])
    assert wanted.any() == (chunk in TWIN_STORED)
    text = ",".join(f"{s.start}:{s.stop}" for s in region)
    found = run_reader("hdf5-1.8", mount / "data.h5", tmp_path / "out.json", "--dataset", "data",
                       "--region", text)
    got = found["datasets"]["data"]
    assert got["error"] is None, got["error"]
    assert got["shape"] == [16000, 16000] and got["chunks"] == list(TWIN_CHUNK)
    assert np.array_equal(np.array(got["values"], dtype=np.uint8).reshape(wanted.shape), wanted)
