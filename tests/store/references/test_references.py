"""Reference sets (kerchunk / VirtualiZarr) on a real mount, h5py as the oracle: kerchunk's
JSON and Parquet references to an HDF5 file, inline chunks, `reference://` with `fo=`,
templates and `gen` entries, and the safety rule: a reference may name only files below the
reference set's own directory (or bucket) unless `-o references_allow=` says otherwise; a
refused one fails its own reads with EIO, the log names it, and the rest of the mount reads.

What kerchunk 0.2.10 writes for h5py files (SingleHdf5ToZarr, inline_threshold=100): v1
references with Zarr v2 metadata (`.zgroup`, `.zarray` with shuffle + zlib as filters,
`.zattrs` with `_ARRAY_DIMENSIONS`), chunk keys `0.1`, a contiguous dataset as one chunk, and
chunks under the threshold inline (ASCII as a plain string, the rest as `base64:`).
`refs_to_dataframe` writes `.zmetadata` (holding `record_size`) and `<array>/refs.<n>.parq`,
and only handles arrays at the top level.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import boto3
import h5py
import numpy as np
import pytest
from kerchunk.df import refs_to_dataframe

from tests.helpers.mounting import ZARRFS, Mount, MountFactory
from tests.helpers.references_fixtures import (
    Datasets,
    inline_references,
    kerchunk_references,
    raw_array_references,
    whole_file_references,
    write_hdf5,
    write_json,
)
from tests.helpers.s3_server import S3_ENV, S3Server, free_port, running
from zarrfs.store.references.filesystem import is_reference_source


def read_array(mount: Mount, name: str, dtype: np.dtype[Any]) -> np.ndarray:
    # Not np.fromfile: it holds the GIL while it reads, and the S3 test's moto server is a
    # thread of this process that the read waits on.
    return np.frombuffer((mount.path / name / "data").read_bytes(), dtype)


def assert_reads_as(mount: Mount, datasets: Datasets) -> None:
    for name, values in datasets.items():
        read = read_array(mount, name, values.dtype)
        assert np.array_equal(read, values.ravel()), name


def assert_refused(mount: Mount, name: str, key: str, target: str) -> None:
    with pytest.raises(OSError) as raised:
        (mount.path / name / "data").read_bytes()
    assert raised.value.errno == errno.EIO, name
    log = mount.log()
    assert any(key in line and target in line for line in log.splitlines()), (name, log)


@pytest.fixture
def hdf5_set(tmp_path: Path) -> tuple[Path, Datasets]:
    """refs.json beside data.h5, as kerchunk writes it."""
    directory = tmp_path / "set"
    directory.mkdir()
    datasets = write_hdf5(directory / "data.h5")
    return write_json(directory / "refs.json", kerchunk_references(directory / "data.h5")), datasets


def test_kerchunk_hdf5_references_read_as_h5py_reads_them(
        hdf5_set: tuple[Path, Datasets], mount_array: MountFactory) -> None:
    refs, datasets = hdf5_set
    references = json.loads(refs.read_text())["refs"]
    assert isinstance(references["tiny/0"], str) and not isinstance(references["cube/0.0.0"], str)
    mount = mount_array(refs)
    assert_reads_as(mount, datasets)
    assert sorted(os.listdir(mount.path / "grp")) == [".zattrs", ".zgroup", "a", "b", "data.h5", "data.nc"]
    assert (mount.path / "chunked" / ".zarray").read_bytes() == references["chunked/.zarray"].encode()
    # A chunk file is the decoded chunk: chunk (1, 2) of a (16, 20) grid over (60, 50).
    chunk = np.fromfile(mount.path / "chunked" / "chunks" / "1.2", "<f4").reshape(16, 20)
    assert np.array_equal(chunk[:, :10], datasets["chunked"][16:32, 40:50])
    with pytest.raises(OSError) as raised:
        (mount.path / "chunked" / "data").write_bytes(b"x")
    assert raised.value.errno in (errno.EROFS, errno.EACCES, errno.EPERM)


def test_info_describes_a_reference_set(hdf5_set: tuple[Path, Datasets]) -> None:
    refs, _ = hdf5_set
    done = subprocess.run([ZARRFS, "info", str(refs)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    for name in ("chunked", "contiguous", "cube", "grp/a"):
        assert name in done.stdout, done.stdout


def test_reference_protocol_with_fo(hdf5_set: tuple[Path, Datasets], mount_array: MountFactory) -> None:
    refs, datasets = hdf5_set
    mount = mount_array("reference://", [f"fo={refs}"])
    assert_reads_as(mount, {name: datasets[name] for name in ("chunked", "grp/b", "tiny")})


def test_parquet_reference_directory(hdf5_set: tuple[Path, Datasets], mount_array: MountFactory) -> None:
    refs, datasets = hdf5_set
    top_level = json.loads(refs.read_text())
    top_level["refs"] = {k: v for k, v in top_level["refs"].items() if not k.startswith("grp")}
    parquet = refs.parent / "refs.parq"
    refs_to_dataframe(top_level, str(parquet), record_size=5)  # several records an array
    assert is_reference_source(str(parquet), {})
    mount = mount_array(parquet)
    assert_reads_as(mount, {k: v for k, v in datasets.items() if not k.startswith("grp")})


@pytest.mark.fast
def test_inline_chunks_base64_and_text(tmp_path: Path, mount_array: MountFactory) -> None:
    values = np.frombuffer(b"\x00\x01\xfe\xffzarrfs!!", "u1")  # binary, then ASCII text
    refs = write_json(tmp_path / "inline.json", inline_references(values))
    mount = mount_array(refs)
    assert np.array_equal(read_array(mount, "inline", values.dtype), values)
    assert (mount.path / "inline" / "chunks" / "1").read_bytes() == b"rrfs!!"
    assert os.path.getsize(mount.path / "inline" / "data") == values.size


def test_chunks_referenced_as_whole_files(tmp_path: Path, mount_array: MountFactory) -> None:
    """A reference without offset and size (a whole file): listed with the size of its file,
    in `ls -l`, the views that index chunks by size (data.h5) and reads (it was EIO after a
    listing: the listing's size None was taken as a number)."""
    values = np.arange(4096, dtype="<u2")
    refs = write_json(tmp_path / "whole.json", whole_file_references("whole", tmp_path, values, 512))
    mount = mount_array(refs)
    chunks = mount.path / "whole" / "chunks"
    assert {entry.name: entry.stat().st_size for entry in os.scandir(chunks)} == {
        str(index): 1024 for index in range(8)}
    assert np.array_equal(read_array(mount, "whole", values.dtype), values)
    with h5py.File(mount.path / "whole" / "data.h5", "r") as f:
        assert np.array_equal(f["data"][...], values)


def test_detection_never_takes_a_normal_store(tmp_path: Path, hdf5_set: tuple[Path, Datasets]) -> None:
    refs, _ = hdf5_set
    store = tmp_path / "store.zarr"
    store.mkdir()
    (store / ".zgroup").write_text('{"zarr_format": 2}')
    (store / ".zmetadata").write_text('{"metadata": {}, "zarr_consolidated_format": 1}')
    (store / "zarr.json").write_text("{}")
    assert not is_reference_source(str(store), {})
    assert not is_reference_source(str(store / "missing.json"), {})
    assert is_reference_source(str(refs), {})
    assert is_reference_source("reference://", {})


# -- where references may point -----------------------------------------------------------


def unsafe_set(tmp_path: Path) -> tuple[Path, Path, np.ndarray, np.ndarray]:
    """A reference set in `set/` with arrays reading `set/inside.bin` (absolute, relative,
    through a template, through `gen`) and arrays reaching `elsewhere/secret.bin` every way a
    reference can (absolute path, `../`, a symlink, file://, a template, `gen`)."""
    directory, elsewhere = tmp_path / "set", tmp_path / "elsewhere"
    directory.mkdir()
    elsewhere.mkdir()
    inside = np.arange(8, dtype="u1")
    secret = np.arange(100, 108, dtype="u1")
    (directory / "inside.bin").write_bytes(inside.tobytes())
    (elsewhere / "secret.bin").write_bytes(secret.tobytes())
    (directory / "link.bin").symlink_to(elsewhere / "secret.bin")
    refs: dict[str, Any] = {".zgroup": json.dumps({"zarr_format": 2})}
    for name, target in [("absolute", str(directory / "inside.bin")), ("relative", "inside.bin"),
                         ("templated", "{{here}}/inside.bin"),
                         ("outside", str(elsewhere / "secret.bin")),
                         ("dotdot", "../elsewhere/secret.bin"), ("link", "link.bin"),
                         ("fileurl", f"file://{elsewhere}/secret.bin"),
                         ("template_out", "{{away}}/secret.bin")]:
        refs.update(raw_array_references(name, target, inside))
    for name in ("generated", "gen_out"):
        refs.update({k: v for k, v in raw_array_references(name, "", inside).items()
                     if k.endswith(".zarray")})
    gen = [{"key": "generated/{{i}}", "url": "{{here}}/inside.bin", "offset": "0", "length": "8",
            "dimensions": {"i": {"stop": 1}}},
           {"key": "gen_out/{{i}}", "url": "{{away}}/secret.bin", "offset": "0", "length": "8",
            "dimensions": {"i": {"stop": 1}}}]
    references = {"version": 1, "templates": {"here": str(directory), "away": str(elsewhere)},
                  "refs": refs, "gen": gen}
    return write_json(directory / "refs.json", references), elsewhere, inside, secret


REFUSED = {"outside": "secret.bin", "dotdot": "../elsewhere/secret.bin", "link": "link.bin",
           "fileurl": "secret.bin", "template_out": "secret.bin", "gen_out": "secret.bin"}
ALLOWED = ("absolute", "relative", "templated", "generated")


@pytest.mark.fast
def test_references_outside_the_set_are_refused(tmp_path: Path, mount_array: MountFactory) -> None:
    refs, _, inside, _ = unsafe_set(tmp_path)
    mount = mount_array(refs)
    for name in ALLOWED:
        assert np.array_equal(read_array(mount, name, inside.dtype), inside), name
    for name, target in REFUSED.items():
        assert_refused(mount, name, f"{name}/0", target)
    for name in ALLOWED:  # the mount is still whole
        assert np.array_equal(read_array(mount, name, inside.dtype), inside), name


def test_references_allow_widens(tmp_path: Path, mount_array: MountFactory) -> None:
    refs, elsewhere, inside, secret = unsafe_set(tmp_path)
    mount = mount_array(refs, [f"references_allow={elsewhere}:/nonexistent"])
    for name in REFUSED:
        assert np.array_equal(read_array(mount, name, secret.dtype), secret), name
    for name in ALLOWED:
        assert np.array_equal(read_array(mount, name, inside.dtype), inside), name


# -- S3 ------------------------------------------------------------------------------------


def test_s3_references_own_bucket_only(tmp_path: Path, mount_array: MountFactory,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in S3_ENV.items():
        monkeypatch.setenv(name, value)
    datasets = write_hdf5(tmp_path / "data.h5")
    with running(S3Server(free_port())) as server:
        client = boto3.client("s3", endpoint_url=server.endpoint_url, region_name="us-east-1")
        client.create_bucket(Bucket="other")
        bucket = f"s3://{server.bucket}"
        client.upload_file(str(tmp_path / "data.h5"), server.bucket, "virtual/data.h5")
        secret = np.arange(50, 58, dtype="u1")
        client.put_object(Bucket="other", Key="secret.bin", Body=secret.tobytes())
        refs = kerchunk_references(tmp_path / "data.h5", f"{bucket}/virtual/data.h5")
        refs["refs"].update(raw_array_references("stolen", "s3://other/secret.bin", secret))
        refs["refs"].update(raw_array_references("climb", f"{bucket}/virtual/../../other/secret.bin",
                                                 secret))
        client.put_object(Bucket=server.bucket, Key="virtual/refs.json", Body=json.dumps(refs).encode())

        source = f"{bucket}/virtual/refs.json"
        options = [f"endpoint_url={server.endpoint_url}"]
        mount = mount_array(source, options)
        assert_reads_as(mount, datasets)
        assert_refused(mount, "stolen", "stolen/0", "s3://other/secret.bin")
        assert_refused(mount, "climb", "climb/0", "../other/secret.bin")
        mount.unmount()

        widened = mount_array(source, [*options, "references_allow=s3://other/"])
        assert np.array_equal(read_array(widened, "stolen", secret.dtype), secret)
        assert_reads_as(widened, {"cube": datasets["cube"]})
