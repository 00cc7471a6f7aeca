"""Azure Blob Storage (`az://`, `abfs://`, adlfs) as a compare-and-swap store, against Azurite
on 127.0.0.1 (`azurite_server`; the first test checks with the SDK alone that it refuses a
write whose ETag condition does not hold, so a test relying on that cannot pass because it
stopped).

Store level: a put or delete whose expected ETag (None: absent) no longer holds raises
ConflictError and changes nothing, and reads report the ETags puts return. Through real
mounts: a v3 array zarr-python wrote through adlfs reads back equal, by either URL scheme; a
write through the mount is what zarr-python then reads; two mounts writing different elements
of one chunk, each holding a stale copy, lose no update (each write-back after the first
conflicts and merges; v3, sharded v3, v2), nor do two mounts creating one chunk, nor a mount
writing over a chunk zarr-python rewrote; credentials come from a connection string, or an
account name and key (or Azurite's development account) with `-o endpoint_url=`, and
`-o anon` reads a public container whatever the environment names; the daemon's log holds no
line per request (the Azure SDK logs each request's headers at INFO); and a silent server
costs a read its timeout, then EIO.
"""

from __future__ import annotations

import errno
import hashlib
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import adlfs
import numcodecs
import numpy as np
import pytest
import zarr
from azure.core import MatchConditions
from azure.core.exceptions import ResourceExistsError, ResourceModifiedError
from zarr.codecs import ZstdCodec

from tests.helpers.azurite_server import ACCOUNT, KEY, AzuriteServer, running
from tests.helpers.mounting import Mount, pread, timed
from tests.helpers.netproxy import proxied
from tests.helpers.store_conformance import assert_compare_and_swap, write_in_rounds, write_row_and_block
from tests.helpers.two_writers import Writer, lost
from zarrfs.errors import ConflictError
from zarrfs.options import MountOptions, OptionError
from zarrfs.store import Store
from zarrfs.store.sources import open_filesystem

SHAPE = (64, 48)
CHUNKS = (16, 16)
VALUES = np.arange(SHAPE[0] * SHAPE[1], dtype="<f4").reshape(SHAPE) / 4 - 100
ROUNDS = 12


@pytest.fixture(scope="module")
def azurite() -> Iterator[AzuriteServer]:
    with running() as server:
        yield server


@pytest.fixture
def container(azurite: AzuriteServer, request: pytest.FixtureRequest) -> str:
    """A fresh container of the module's server for each test (names: 3-63 of [a-z0-9-])."""
    slug = "".join(c if c.isalnum() else "-" for c in request.node.name.lower())[:40].strip("-")
    name = f"t-{slug}-{hashlib.sha1(request.node.nodeid.encode()).hexdigest()[:8]}"
    azurite.service().create_container(name)  # type: ignore[attr-defined]
    return name


def test_fixture_server_honours_etag_conditions(azurite: AzuriteServer, container: str) -> None:
    blob = azurite.service().get_blob_client(container, "k")  # type: ignore[attr-defined]
    first = blob.upload_blob(b"one", overwrite=True, match_condition=MatchConditions.IfMissing)["etag"]
    with pytest.raises(ResourceExistsError):
        blob.upload_blob(b"two", overwrite=True, match_condition=MatchConditions.IfMissing)
    second = blob.upload_blob(b"two", overwrite=True, etag=first,
                              match_condition=MatchConditions.IfNotModified)["etag"]
    assert second != first
    with pytest.raises(ResourceModifiedError):
        blob.upload_blob(b"three", overwrite=True, etag=first, match_condition=MatchConditions.IfNotModified)
    with pytest.raises(ResourceModifiedError):
        blob.delete_blob(etag=first, match_condition=MatchConditions.IfNotModified)
    assert blob.download_blob().readall() == b"two"


@pytest.mark.fast
def test_store_compare_and_swap(azurite: AzuriteServer, container: str) -> None:
    store = Store(adlfs.AzureBlobFileSystem(**azurite.adlfs_options()), f"{container}/cas")
    assert_compare_and_swap(store)
    other = store.put("j", b"other", expect=None)
    store.put("k", b"first", expect=None)
    many = store.read_many(["k", "nothing", "j"])  # (in flight at once)
    found = [(v.data, v.generation) if v else None for v in many]
    assert found == [(b"first", store.generation("k")), None, (b"other", other)]


def racing_puts(stores: list[Store], key: str, data: list[bytes], expect: str | None) -> list[str | None]:
    """Each store puts its `data` at the same moment (a barrier), all expecting `expect`:
    the new generation each got, or None for a conflict."""
    start = threading.Barrier(len(stores))
    won: list[str | Exception | None] = [RuntimeError("no answer")] * len(stores)

    def put(i: int) -> None:
        start.wait(10)
        try:
            won[i] = stores[i].put(key, data[i], expect=expect)
        except ConflictError:
            won[i] = None

    threads = [threading.Thread(target=put, args=(i,)) for i in range(len(stores))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not any(isinstance(answer, Exception) for answer in won), won
    return [answer for answer in won if not isinstance(answer, Exception)]


def test_racing_puts_of_one_generation_one_wins(azurite: AzuriteServer, container: str) -> None:
    """Four stores (four adlfs clients) put one key expecting one ETag at the same moment,
    20 times: each time exactly one put succeeds, and what is stored is its data. Then the
    same for a key that does not exist (measured: 100 rounds of 100 had one winner each)."""
    stores = [Store(adlfs.AzureBlobFileSystem(**azurite.adlfs_options(skip_instance_cache=True)),
                    f"{container}/race") for _ in range(4)]
    generation = stores[0].put("k", b"start", expect=None)
    for r in range(20):
        data = [f"{r}-{i}".encode() for i in range(len(stores))]
        won = racing_puts(stores, "k", data, generation)
        winners = [i for i, tag in enumerate(won) if tag is not None]
        assert len(winners) == 1, won
        found = stores[0].read("k")
        assert found is not None and (found.data, found.generation) == (data[winners[0]], won[winners[0]])
        generation = found.generation
    stores[0].delete("k", expect=generation)
    created = racing_puts(stores, "k", [b"a", b"b", b"c", b"d"], None)  # (If-None-Match: *)
    assert sum(tag is not None for tag in created) == 1, created


def create_array(azurite: AzuriteServer, container: str, chunks: tuple[int, int] = CHUNKS,
                 values: np.ndarray = VALUES, layout: str = "v3") -> None:
    """The array zarr-python writes: `layout` v3 (zstd), v3-sharded (16 x 16 shards of
    `chunks`) or v2 (its zstd compressor)."""
    codec: dict[str, Any] = {"compressors": ZstdCodec(level=1)}
    if layout == "v2":
        codec = {"zarr_format": 2, "compressors": numcodecs.Zstd(level=1)}
    elif layout == "v3-sharded":
        codec["shards"] = (16, 16)
    array = zarr.create_array(
        store=f"az://{container}/array", shape=values.shape, chunks=chunks, dtype=values.dtype,
        fill_value=0, storage_options=azurite.adlfs_options(), **codec)
    array[...] = values


def read_zarr_python(azurite: AzuriteServer, container: str) -> np.ndarray:
    array = zarr.open_array(f"az://{container}/array", mode="r", storage_options=azurite.adlfs_options())
    return np.asarray(array[...])


def by_connection_string(azurite: AzuriteServer) -> dict[str, str]:
    return {"AZURE_STORAGE_CONNECTION_STRING": azurite.connection_string}


@pytest.mark.parametrize("scheme", ["az", "abfs"])
def test_mount_reads_and_writes_an_array_on_azure(azurite: AzuriteServer, container: str,
                                                  mount_array: Any, scheme: str) -> None:
    create_array(azurite, container)
    mount: Mount = mount_array(f"{scheme}://{container}/array", ["direct_io"],
                               env=by_connection_string(azurite))
    data = np.frombuffer(mount.data.read_bytes(), "<f4").reshape(SHAPE)
    assert np.array_equal(data, VALUES)

    expected = write_row_and_block(mount.data, VALUES)
    assert np.array_equal(read_zarr_python(azurite, container), expected)
    assert mount.unmount() == 0, mount.log()
    assert "Traceback" not in mount.log(), mount.log()
    assert "cannot write conditionally" not in mount.log(), mount.log()


@pytest.mark.parametrize("layout", ["v3", "v3-sharded", "v2"])
def test_two_mounts_lose_no_update(azurite: AzuriteServer, container: str, mount_array: Any,
                                   layout: str) -> None:
    """Each round both mounts read everything (caching chunk (0, 0)), then A writes rows 0-3
    of it and B rows 4-7, each fsyncing: B's copy is stale, so its put must fail on the ETag
    and merge its elements into A's chunk. (A shard's write-back reads the stored shard just
    before its put: B's then conflicts only when A's put lands in between.)"""
    create_array(azurite, container, chunks=(8, 8), layout=layout)
    source, env = f"az://{container}/array", by_connection_string(azurite)
    a = Writer("A", mount_array(source, ["direct_io", "cache=16M"], env=env)).open()
    b = Writer("B", mount_array(source, ["direct_io", "cache=16M"], env=env)).open()
    expected, conflicts = write_in_rounds(a, b, VALUES, ROUNDS)
    for writer in (a, b):
        assert writer.mount.unmount() == 0, writer.mount.log()
    stored = read_zarr_python(azurite, container)
    assert lost(stored, expected) == 0, (stored[:8, :8], expected[:8, :8])
    if layout != "v3-sharded":
        assert conflicts >= 2 * ROUNDS - 2, conflicts  # every write-back but the first
    assert not any("cannot write conditionally" in w.mount.log() for w in (a, b))


def test_two_mounts_create_one_chunk(azurite: AzuriteServer, container: str, mount_array: Any) -> None:
    """Chunk (0, 0) not stored yet (all fill value): both mounts read it as such, A stores it
    first, B's put with If-None-Match: * then fails, and B merges its element into A's."""
    array = zarr.create_array(store=f"az://{container}/array", shape=SHAPE, chunks=(8, 8), dtype="<f4",
                              fill_value=0, storage_options=azurite.adlfs_options())
    array[40:, 40:] = 1  # (one chunk stored elsewhere: the array is not empty)
    source, env = f"az://{container}/array", by_connection_string(azurite)
    a = Writer("A", mount_array(source, ["direct_io"], env=env)).open()
    b = Writer("B", mount_array(source, ["direct_io"], env=env)).open()
    try:
        for writer in (a, b):
            os.pread(writer.fd, VALUES.nbytes, 0)
        for writer, (i, j), value in ((a, (1, 1), 5.0), (b, (6, 6), 7.0)):
            os.pwrite(writer.fd, np.float32(value).tobytes(), (i * SHAPE[1] + j) * 4)
            writer.fsync()
        conflicts = int(b.stats()["write_conflicts"])
    finally:
        a.close()
        b.close()
    stored = read_zarr_python(azurite, container)
    assert (stored[1, 1], stored[6, 6]) == (5.0, 7.0), stored[:8, :8]
    assert conflicts == 1


def test_a_mount_writes_over_a_chunk_zarr_python_rewrote(azurite: AzuriteServer, container: str,
                                                         mount_array: Any) -> None:
    """Each round zarr-python (adlfs, unconditional) rewrites all of chunk (0, 0), then the
    mount, whose cached copy is stale, writes two elements of it: the store holds zarr-python's
    chunk with the mount's two elements, never the mount's stale copy."""
    create_array(azurite, container, chunks=(8, 8))
    writer = Writer("M", mount_array(f"az://{container}/array", ["direct_io", "cache=16M"],
                                     env=by_connection_string(azurite))).open()
    other = zarr.open_array(f"az://{container}/array", mode="r+", storage_options=azurite.adlfs_options())
    expected = VALUES.copy()
    try:
        for r in range(4):
            os.pread(writer.fd, VALUES.nbytes, 0)  # (chunk (0, 0) cached)
            expected[:8, :8] = other[:8, :8] = np.full((8, 8), 100.0 + r, "<f4")
            for i, j in ((r, r), (7 - r, r)):
                os.pwrite(writer.fd, np.float32(-r).tobytes(), (i * SHAPE[1] + j) * 4)
                expected[i, j] = -r
            writer.fsync()
    finally:
        writer.close()
    stored = read_zarr_python(azurite, container)
    assert lost(stored, expected) == 0, (stored[:8, :8], expected[:8, :8])


@pytest.mark.parametrize("credentials", ["account name and key", "UseDevelopmentStorage",
                                         "connection string of another endpoint"])
def test_credentials_with_an_endpoint(azurite: AzuriteServer, container: str, mount_array: Any,
                                      credentials: str) -> None:
    """`-o endpoint_url=` with the credentials of the environment: an account name and key,
    Azurite's development account (the SDK alone would go to port 10000), or a connection
    string whose own endpoint is elsewhere (nothing listens on port 1)."""
    elsewhere = azurite.connection_string.replace(f":{azurite.port}/", ":1/")
    named = "AZURE_STORAGE_CONNECTION_STRING"
    env = {"account name and key": azurite.account_env,
           "UseDevelopmentStorage": {named: "UseDevelopmentStorage=true"},
           "connection string of another endpoint": {named: elsewhere}}[credentials]
    create_array(azurite, container)
    mount: Mount = mount_array(f"az://{container}/array", [f"endpoint_url={azurite.endpoint_url}", "rw"],
                               env=env)
    assert np.array_equal(np.fromfile(mount.data, "<f4").reshape(SHAPE), VALUES)
    with open(mount.data, "r+b") as f:
        f.write(np.full(SHAPE[1], 3, "<f4").tobytes())
    expected = VALUES.copy()
    expected[0] = 3
    assert np.array_equal(read_zarr_python(azurite, container), expected)


def test_anon_reads_a_public_container(azurite: AzuriteServer, mount_array: Any) -> None:
    public = "public-read"
    azurite.service().create_container(public, public_access="container")  # type: ignore[attr-defined]
    create_array(azurite, public)
    # Credentials that are wrong for this server: with `anon`, none are used.
    wrong_key = azurite.connection_string.replace("AccountKey=Eby8", "AccountKey=AAAA")
    wrong = {"AZURE_STORAGE_CONNECTION_STRING": wrong_key}
    mount: Mount = mount_array(f"az://{public}/array", [f"endpoint_url={azurite.endpoint_url}", "anon", "ro"],
                               env=wrong)
    assert np.array_equal(np.fromfile(mount.data, "<f4").reshape(SHAPE), VALUES)


@pytest.mark.parametrize("debug", [False, True], ids=["default", "debug"])
def test_daemon_log_of_a_mount_a_read_and_a_write_has_no_request_lines(
        azurite: AzuriteServer, container: str, mount_array: Any, debug: bool) -> None:
    """The Azure SDK logs each request and response with its headers at INFO: 632 lines for
    this mount and read before its loggers were quieted. Not even `debug` lets them in (they
    may carry credentials, as the other clients' do)."""
    values = np.arange(512 * 512, dtype="<f4").reshape(512, 512)  # 1 MiB
    create_array(azurite, container, chunks=(128, 128), values=values)
    mount: Mount = mount_array(f"az://{container}/array", ["debug"] if debug else [],
                               env=by_connection_string(azurite))
    assert np.array_equal(np.fromfile(mount.data, "<f4").reshape(values.shape), values)
    with open(mount.data, "r+b") as f:
        f.write(np.ones(512, "<f4").tobytes())
    assert mount.unmount() == 0
    lines = mount.log().splitlines()
    requests = [line for line in lines if "Request URL" in line or "x-ms-" in line or "azure" in line]
    assert not requests, "\n".join(requests[:20]) + f"\n({len(requests)} lines)"
    if not debug:
        assert len(lines) < 20, "\n".join(lines)


def test_a_silent_server_costs_a_read_its_timeout_then_eio(azurite: AzuriteServer, container: str,
                                                           mount_array: Any) -> None:
    """Through a proxy that swallows traffic: the read of a chunk not cached fails with EIO
    once the mount's timeout is spent (the SDK's own retries, 3 with backoff by default, do
    not add to it), and reads again once the network heals."""
    create_array(azurite, container)
    timeout = 3.0
    with proxied(azurite.port) as proxy:
        options = [f"endpoint_url={proxy.url}/{ACCOUNT}", f"timeout={timeout:g}", "direct_io", "ro"]
        mount: Mount = mount_array(f"az://{container}/array", options, env=azurite.account_env)
        proxy.swallow()
        missing, took = timed(lambda: pread(mount.data, 4096, 0))
        assert isinstance(missing, OSError) and missing.errno == errno.EIO, missing
        assert took < 2 * timeout + 5, took  # a bound on a hang, not a pace
        proxy.heal()
        # Loads the silent read began (its chunks, and read-ahead) may still be spending the
        # rest of their deadlines, at most `timeout`: a read that joins one fails with it.
        until = time.monotonic() + timeout + 5
        healed = [timed(lambda: pread(mount.data, 4096, 0))[0]]
        while isinstance(healed[-1], OSError) and time.monotonic() < until:
            healed.append(timed(lambda: pread(mount.data, 4096, 0))[0])
        assert healed[-1] == VALUES.tobytes()[:4096], (healed, mount.log())
    assert "no answer" in mount.log(), mount.log()


@pytest.mark.fast
def test_anon_uses_no_credentials_whatever_the_environment_names(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without an endpoint too: adlfs alone would sign with the environment's connection
    string, `anon` or not. (Opening a filesystem sends no request.)"""
    other = f"AccountName=other;AccountKey={KEY};EndpointSuffix=core.windows.net"
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", other)
    anonymous = MountOptions.parse(["ro,anon,account_name=pcdata"]).source
    fs, root = open_filesystem("az://public/cube.zarr", anonymous)
    assert root == "public/cube.zarr"
    assert fs.service_client.url.startswith("https://pcdata.blob.core.windows.net")
    assert fs.service_client.credential is None
    signed, _ = open_filesystem("az://public/cube.zarr", MountOptions.parse(["account_name=pcdata"]).source)
    assert signed.service_client.url.startswith("https://other.blob.core.windows.net")  # (the control)
    for secret in ("account_key=x", "sas_token=x", "connection_string=x"):
        with pytest.raises(OptionError):
            MountOptions.parse([secret])
