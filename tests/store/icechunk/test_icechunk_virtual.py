"""Icechunk repositories with virtual chunks (as VirtualiZarr writes them: byte ranges of other
files), written by Icechunk's own API and read through a real mount against what zarr-python
reads through Icechunk with the container authorized. A container below the repository (its
directory or bucket) is read; one elsewhere (another directory, bucket, an HTTP server) is
refused at once, with EIO and a log line naming `references_allow`, until that option allows
it; a hostile repository's containers, endpoints and references get nothing of the mounter's
files, nor, with `-o user=`, does a link below an allowed container."""

from __future__ import annotations

import errno
import random
from pathlib import Path
from typing import Any

import boto3
import icechunk
import numpy as np
import pytest
import zarr

from tests.helpers.http_server import serving
from tests.helpers.mounting import Mount, mounted, timed
from tests.helpers.s3_server import S3_ENV, S3Server, free_port, running
from tests.helpers.trust_helpers import public, read_as, secret_file
from zarrfs.declared import OptionValues
from zarrfs.store.icechunk import filesystem as icechunk_store
from zarrfs.store.settings import TIMEOUT as TIMEOUT_OPTION
from zarrfs.store.settings import SourceOptions
from zarrfs.store.targets import REFERENCES_ALLOW

HEADER = b"VIRTUALZARRFS-v1"  # (the bytes before the data, as a NetCDF/HDF5 file has some)
SHAPE, CHUNK_ROWS, DTYPE = (50, 12), 10, "<f8"
CHUNK_BYTES = CHUNK_ROWS * SHAPE[1] * 8
VALUES = np.linspace(-1, 1, SHAPE[0] * SHAPE[1]).reshape(SHAPE)
TIMEOUT = 30  # -o timeout=: a refusal must come in well under it (not after the retries)
REFUSED_WITHIN = TIMEOUT / 3  # (slack for a loaded machine)
__all__ = ["public"]  # (the fixture, used by name)


def source_bytes(values: np.ndarray = VALUES) -> bytes:
    """A file whose data follows a header, row by row (each chunk of rows one byte range)."""
    return HEADER + values.astype(DTYPE).tobytes()


def create(storage: icechunk.Storage, containers: dict[str, Any], refs: dict[str, str]) -> None:
    """A repository declaring `containers` (URL prefix: the store config reaching it), whose
    `virtual` array's chunk rows are byte ranges of the file at `refs[key]` (every other
    chunk: `refs["*"]`), beside a `native` array of stored chunks; committed to `main` and
    tagged `v1`."""
    config = icechunk.RepositoryConfig.default()
    for prefix, store in containers.items():
        config.set_virtual_chunk_container(icechunk.VirtualChunkContainer(prefix, store))
    repo = icechunk.Repository.create(storage, config=config)
    session = repo.writable_session("main")
    root = zarr.group(store=session.store)
    root.create_array("virtual", shape=SHAPE, chunks=(CHUNK_ROWS, SHAPE[1]), dtype=DTYPE,
                      fill_value=0.0, compressors=None)
    for row in range(SHAPE[0] // CHUNK_ROWS):
        key = f"virtual/c/{row}/0"
        location = refs.get(key) or refs["*"]
        session.store.set_virtual_ref(key, location, offset=len(HEADER) + row * CHUNK_BYTES,
                                      length=CHUNK_BYTES, validate_container=False)
    root.create_array("native", shape=(6,), chunks=(4,), dtype="<i4", fill_value=0)[:] = np.arange(6)
    repo.create_tag("v1", session.commit("virtual chunks"))


def icechunk_reads(storage: icechunk.Storage, prefix: str, store: Any, credentials: Any = None) -> np.ndarray:
    """What zarr-python reads of `virtual` through Icechunk, the container at `prefix`
    reached with `store` and authorized (the oracle)."""
    config = icechunk.RepositoryConfig.default()
    config.set_virtual_chunk_container(icechunk.VirtualChunkContainer(prefix, store))
    repo = icechunk.Repository.open(storage, config=config, authorize_virtual_chunk_access=
                                    icechunk.containers_credentials({prefix: credentials}))
    return np.asarray(zarr.open_array(repo.readonly_session("main").store, path="virtual", mode="r")[...])


def mounted_values(mount: Mount, array: str = "virtual", dtype: str = DTYPE) -> np.ndarray:
    # (read_bytes lets go of the GIL while it waits: the S3 test's moto server is a thread
    # of this process)
    return np.frombuffer((mount.path / array / "data").read_bytes(), dtype)


def assert_refused_at_once(mount: Mount, *expected: str, array: str = "virtual") -> None:
    """A read of `array` fails with EIO well within the timeout, and a log line names the
    option with `expected`."""
    failed, seconds = timed(lambda: (mount.path / array / "data").read_bytes())
    assert isinstance(failed, OSError) and failed.errno == errno.EIO, failed
    assert seconds < REFUSED_WITHIN, f"refused after {seconds:.1f} s: retried as a fault"
    lines = [line for line in mount.log().splitlines() if "references_allow" in line]
    assert any(all(words in line for words in expected) for line in lines), mount.log()
    assert not retried_virtual_chunks(mount)
    assert (mounted_values(mount, "native", "<i4") == np.arange(6)).all()  # the rest of the mount works


def retried_virtual_chunks(mount: Mount) -> list[str]:
    """The log's lines of a virtual chunk's read retried (any other retry, of a moto server
    slow on a loaded machine, is not the refusal's)."""
    return [line for line in mount.log().splitlines() if "retrying" in line and "virtual" in line]


# -- local files ---------------------------------------------------------------------------


def test_a_container_below_the_repository_reads_as_icechunk_reads_it(tmp_path: Path, mount_array) -> None:
    repo_dir = tmp_path / "repo"
    sources = repo_dir / "sources"
    prefix = f"file://{sources}/"
    storage = icechunk.local_filesystem_storage(str(repo_dir))
    create(storage, {prefix: icechunk.local_filesystem_store(str(sources))}, {"*": f"{prefix}data.bin"})
    sources.mkdir()  # (Icechunk creates a repository in an empty directory only)
    (sources / "data.bin").write_bytes(source_bytes())

    expected = icechunk_reads(storage, prefix, icechunk.local_filesystem_store(str(sources)))
    np.testing.assert_array_equal(expected.ravel(), VALUES.ravel())
    mount = mount_array(f"icechunk://{repo_dir}", [f"timeout={TIMEOUT}"])
    np.testing.assert_array_equal(mounted_values(mount), expected.ravel())
    chunk = np.frombuffer((mount.path / "virtual/chunks/c/2/0").read_bytes(), DTYPE)
    np.testing.assert_array_equal(chunk, expected[2 * CHUNK_ROWS:3 * CHUNK_ROWS].ravel())
    for version in ("branches/main", "tags/v1"):
        np.testing.assert_array_equal(
            np.frombuffer((mount.path / ".versions" / version / "virtual/data").read_bytes(), DTYPE),
            expected.ravel())


def test_a_write_into_a_virtual_chunk_merges_with_its_bytes(tmp_path: Path, mount_array) -> None:
    """A partial write into a virtual chunk reads it (its container authorized for the
    writing session too) and commits the merged chunk as a stored one."""
    repo_dir = tmp_path / "repo"
    sources = repo_dir / "sources"
    prefix = f"file://{sources}/"
    storage = icechunk.local_filesystem_storage(str(repo_dir))
    create(storage, {prefix: icechunk.local_filesystem_store(str(sources))}, {"*": f"{prefix}data.bin"})
    sources.mkdir()
    (sources / "data.bin").write_bytes(source_bytes())
    mount = mount_array(f"icechunk://{repo_dir}", ["rw"])
    written = np.full(8, 99.5)
    with open(mount.path / "virtual/data", "r+b") as f:
        f.seek(130 * 8)  # (inside the second chunk of rows)
        f.write(written.tobytes())
    expected = VALUES.copy().ravel()
    expected[130:138] = written
    np.testing.assert_array_equal(
        icechunk_reads(storage, prefix, icechunk.local_filesystem_store(str(sources))).ravel(), expected)
    assert (sources / "data.bin").read_bytes() == source_bytes()  # (the source file is not written)


@pytest.mark.fast
def test_a_container_elsewhere_is_refused_at_once_until_allowed(
        tmp_path: Path, mount_array) -> None:
    elsewhere = tmp_path / "netcdf"
    elsewhere.mkdir()
    (elsewhere / "data.bin").write_bytes(source_bytes())
    repo_dir = tmp_path / "repo"
    prefix = f"file://{elsewhere}/"
    storage = icechunk.local_filesystem_storage(str(repo_dir))
    create(storage, {prefix: icechunk.local_filesystem_store(str(elsewhere))}, {"*": f"{prefix}data.bin"})

    refused = mount_array(f"icechunk://{repo_dir}", [f"timeout={TIMEOUT}"])
    assert_refused_at_once(refused, str(elsewhere), str(repo_dir))
    refused.unmount()

    allowed = mount_array(f"icechunk://{repo_dir}", [f"timeout={TIMEOUT}", f"references_allow={elsewhere}"])
    expected = icechunk_reads(storage, prefix, icechunk.local_filesystem_store(str(elsewhere)))
    np.testing.assert_array_equal(mounted_values(allowed), expected.ravel())


def test_a_hostile_repository_gets_none_of_the_mounters_files(tmp_path: Path, mount_array) -> None:
    """Its writer declares containers over the mounter's files (`/etc`, the directory above the
    repository, `file://repo/`: the root) and points chunks at a file of the mounter's,
    directly, by an encoded `..` below the repository and by a host name: every such read
    fails at once, and no byte of it shows."""
    secret = np.full(SHAPE, 7.25)
    (tmp_path / "secret.bin").write_bytes(source_bytes(secret))
    repo_dir = tmp_path / "repo"
    storage = icechunk.local_filesystem_storage(str(repo_dir))
    inside = f"file://{repo_dir}/sources/"
    refs = {"virtual/c/0/0": f"file://{tmp_path}/secret.bin",
            "virtual/c/1/0": f"{inside}..%2F..%2Fsecret.bin",
            "virtual/c/2/0": f"{inside}%2e%2e/%2e%2e/secret.bin",
            # (Icechunk reads /PATH of file://HOST/PATH; HOST/ looks like a directory below the
            # repository, a relative path)
            "virtual/c/3/0": f"file://repo{tmp_path}/secret.bin", "*": "file:///etc/shadow"}
    create(storage, dict.fromkeys(("file:///etc/", f"file://{tmp_path}/", inside, "file://repo/"),
                                  icechunk.local_filesystem_store("/")), refs)
    (repo_dir / "sources").mkdir()

    mount = mount_array(f"icechunk://{repo_dir}", [f"timeout={TIMEOUT}", "allow_other"])
    assert_refused_at_once(mount, str(tmp_path))
    for row in range(SHAPE[0] // CHUNK_ROWS):
        failed, seconds = timed(lambda row=row: (mount.path / f"virtual/chunks/c/{row}/0").read_bytes())
        assert isinstance(failed, OSError) and failed.errno == errno.EIO, (row, failed)
        assert seconds < REFUSED_WITHIN
    assert (secret.tobytes()[:16]) not in mount.log().encode()


def test_an_http_container_is_read_once_references_allow_names_it(tmp_path: Path, mount_array) -> None:
    """Without credentials, and without the options the repository declares (a proxy).
    Icechunk 1 keeps no port in an HTTP chunk's location: the server listens on port 80, of a
    loopback address of its own (so no other server there is in its way)."""
    (tmp_path / "www/nc").mkdir(parents=True)
    (tmp_path / "www/nc/data.nc").write_bytes(source_bytes())
    host = f"127.{random.randrange(1, 255)}.{random.randrange(1, 255)}.{random.randrange(2, 255)}"
    with serving(tmp_path / "www", address=(host, 80)):
        prefix = f"http://{host}/nc/"
        storage = icechunk.local_filesystem_storage(str(tmp_path / "repo"))
        declared = icechunk.http_store({"proxy_url": f"http://127.0.0.1:{free_port()}", "allow_http": "true"})
        create(storage, {prefix: declared}, {"*": f"{prefix}data.nc"})
        refused = mount_array(f"icechunk://{tmp_path}/repo", [f"timeout={TIMEOUT}"])
        assert_refused_at_once(refused, prefix)
        refused.unmount()
        allowed = mount_array(f"icechunk://{tmp_path}/repo",
                              [f"timeout={TIMEOUT}", f"references_allow=http://{host}/nc"])
        expected = icechunk_reads(storage, prefix, icechunk.http_store({"allow_http": "true"}))
        np.testing.assert_array_equal(expected.ravel(), VALUES.ravel())
        np.testing.assert_array_equal(mounted_values(allowed), expected.ravel())


def test_containers_zarrfs_does_not_reach_are_refused_even_when_allowed(tmp_path: Path) -> None:
    """GCS containers (their credentials not yet taken as the mount takes its own): refused
    as permanently as any other, saying why, whatever `references_allow` says; and a prefix
    Icechunk would read otherwise than the rule (`?`) is never authorized."""
    storage = icechunk.local_filesystem_storage(str(tmp_path / "repo"))
    odd = f"file://{tmp_path}/repo/x?/"
    create(storage, {"gs://bucket/nc/": icechunk.gcs_store(), odd: icechunk.local_filesystem_store("/")},
           {"virtual/c/0/0": "gs://bucket/nc/data.nc", "*": f"{odd}data.nc"})
    settings = SourceOptions(OptionValues({TIMEOUT_OPTION: TIMEOUT, REFERENCES_ALLOW: ("gs://bucket",)}))
    fs, _ = icechunk_store.open_filesystem(f"icechunk://{tmp_path}/repo", {}, settings)
    with pytest.raises(PermissionError, match=r"s3:// and http\(s\):// containers of plain paths"):
        fs.cat_file("/virtual/c/0/0")
    with pytest.raises(PermissionError):
        fs.cat_file("/virtual/c/1/0")


def test_as_another_user_a_link_below_a_container_reads_none_of_roots_files(public: Path) -> None:
    """The limit docs/remote.md names: Icechunk follows a symbolic link below a local
    container. `-o user=` bounds it: the daemon reads as that user, so a link to a file of
    root's fails (EIO, at once) while the container's other chunks read."""
    secret = secret_file(public / "root", source_bytes(np.full(SHAPE, 7.25)))
    repo_dir, sources = public / "repo", public / "repo/sources"
    prefix = f"file://{sources}/"
    storage = icechunk.local_filesystem_storage(str(repo_dir))
    create(storage, {prefix: icechunk.local_filesystem_store(str(sources))},
           {"virtual/c/0/0": f"{prefix}link.bin", "*": f"{prefix}data.bin"})
    sources.mkdir()
    (sources / "data.bin").write_bytes(source_bytes())
    (sources / "link.bin").symlink_to(secret)
    options = ["allow_other", "user=nobody", f"timeout={TIMEOUT}"]
    with mounted(f"icechunk://{repo_dir}", public / "mnt", options) as mount:
        failed, seconds = timed(lambda: read_as(mount.path / "virtual/chunks/c/0/0"))
        assert failed == errno.EIO and seconds < REFUSED_WITHIN, (failed, seconds)
        shown = read_as(mount.path / "virtual/chunks/c/1/0")
        assert shown == VALUES[CHUNK_ROWS:2 * CHUNK_ROWS].astype(DTYPE).tobytes()


# -- S3 ------------------------------------------------------------------------------------


def test_on_s3_the_repositorys_bucket_is_read_with_the_mounts_endpoint_and_credentials(
        mount_array, monkeypatch: pytest.MonkeyPatch) -> None:
    """The repository declares its containers with an endpoint of its choosing (a port where
    nothing listens, as an instance metadata address would be): the mount reaches them at
    its own `endpoint_url`, with the credentials of its environment. A chunk whose object is
    gone fails at once; a container in another bucket is refused at once until
    `references_allow` names it."""
    for name, value in S3_ENV.items():
        monkeypatch.setenv(name, value)
    with running(S3Server(free_port())) as server:
        client = boto3.client("s3", endpoint_url=server.endpoint_url, region_name="us-east-1")
        client.create_bucket(Bucket="other")
        other_values = VALUES[::-1].copy()
        client.put_object(Bucket=server.bucket, Key="sources/data.nc", Body=source_bytes())
        client.put_object(Bucket="other", Key="archive/data.nc", Body=source_bytes(other_values))
        hostile = icechunk.s3_store(region="us-east-1", endpoint_url=f"http://127.0.0.1:{free_port()}",
                                    allow_http=True, s3_compatible=True, force_path_style=True)
        real = icechunk.s3_store(region="us-east-1", endpoint_url=server.endpoint_url,
                                 allow_http=True, s3_compatible=True, force_path_style=True)
        options = [f"endpoint_url={server.endpoint_url}", f"timeout={TIMEOUT}"]

        def repository(name: str, prefix: str, location: str) -> tuple[str, np.ndarray]:
            storage = icechunk.s3_storage(bucket=server.bucket, prefix=f"repos/{name}", region="us-east-1",
                                          endpoint_url=server.endpoint_url, allow_http=True,
                                          force_path_style=True, from_env=True)
            create(storage, {prefix: hostile}, {"*": location})
            oracle = icechunk_reads(storage, prefix, real, icechunk.s3_from_env_credentials())
            return f"icechunk://s3://{server.bucket}/repos/{name}", oracle.ravel()

        own, expected = repository("own", f"s3://{server.bucket}/sources/",
                                   f"s3://{server.bucket}/sources/data.nc")
        np.testing.assert_array_equal(expected, VALUES.ravel())
        np.testing.assert_array_equal(mounted_values(mount_array(own, options, env=S3_ENV)), expected)

        gone, _ = repository("gone", f"s3://{server.bucket}/sources/", f"s3://{server.bucket}/sources/data.nc")
        client.delete_object(Bucket=server.bucket, Key="sources/data.nc")
        mount = mount_array(gone, options, env=S3_ENV)
        failed, seconds = timed(lambda: (mount.path / "virtual/data").read_bytes())
        assert isinstance(failed, OSError) and failed.errno == errno.EIO and seconds < REFUSED_WITHIN
        assert "NoSuchKey" in mount.log() and not retried_virtual_chunks(mount)
        client.put_object(Bucket=server.bucket, Key="sources/data.nc", Body=source_bytes())

        other, expected = repository("other", "s3://other/archive/", "s3://other/archive/data.nc")
        np.testing.assert_array_equal(expected, other_values.ravel())
        refused = mount_array(other, options, env=S3_ENV)
        assert_refused_at_once(refused, "s3://other/archive/", f"s3://{server.bucket}")
        refused.unmount()
        allowed = mount_array(other, [*options, "references_allow=s3://other/archive"], env=S3_ENV)
        np.testing.assert_array_equal(mounted_values(allowed), expected)
        allowed.unmount()
