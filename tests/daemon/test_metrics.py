"""`-o metrics=HOST:PORT`: real daemons scraped over HTTP while a workload runs, the text
parsed by prometheus_client's own parser (the oracle of the exposition format)."""

from __future__ import annotations

import errno
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import zarr
from prometheus_client.parser import text_string_to_metric_families

import zarrfs
from tests.helpers.http_server import serving
from tests.helpers.mounting import is_mounted
from tests.helpers.netproxy import proxied
from zarrfs.daemon.metrics import public_source
from zarrfs.errors import MountError
from zarrfs.options import MountOptions, OptionError

SHAPE = (512, 512)
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture
def source(tmp_path: Path) -> Path:
    """A v3 float32 array of 1 MiB in 64 KiB chunks (zarr-python)."""
    path = tmp_path / "array.zarr"
    array = zarr.create_array(str(path), shape=SHAPE, chunks=(32, 512), dtype="float32", fill_value=0)
    array[...] = np.arange(np.prod(SHAPE), dtype="float32").reshape(SHAPE)
    return path


def scrape(address: str) -> Samples:
    """Every sample of the endpoint: (name, labels) -> value."""
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sum of the samples of `name` whose labels include `labels`."""
    wanted = set(labels.items())
    return sum(v for (n, have), v in samples.items() if n == name and wanted <= have)


@pytest.fixture
def workload() -> Iterator[list[BaseException]]:
    """Where `run_workload` puts what failed in its thread: nothing, checked at the end."""
    errors: list[BaseException] = []
    yield errors
    assert not errors, errors


def run_workload(data: Path, stop: threading.Event, errors: list[BaseException]) -> None:
    """Reads, writes and fsyncs of `data` until `stop`: open, read it all, write a row, fsync."""
    rows = 0
    try:
        while not stop.is_set():
            with open(data, "r+b") as f:
                assert len(f.read()) == data.stat().st_size
                f.seek((rows % SHAPE[0]) * SHAPE[1] * 4)
                f.write(np.full(SHAPE[1], rows, dtype="<f4").tobytes())
                f.flush()
                os.fsync(f.fileno())
            rows += 1
    except BaseException as e:  # (reported by the test, not lost in the thread)
        errors.append(e)


@pytest.mark.fast
def test_a_scrape_during_a_workload_shows_it(source: Path, workload: list[BaseException]) -> None:
    with zarrfs.mount(source, metrics="127.0.0.1:0") as m:
        assert m.metrics_address is not None and m.metrics_address.startswith("127.0.0.1:")
        stop = threading.Event()
        worker = threading.Thread(target=run_workload, args=(m.path / "data", stop, workload))
        worker.start()
        try:
            first = _after_fsyncs(m.metrics_address, 1)
            second = _after_fsyncs(m.metrics_address, _fsyncs(first) + 3)
        finally:
            stop.set()
            worker.join()
        mount = str(source)
        for name in ("zarrfs_requests_total", "zarrfs_bytes_stored_total", "zarrfs_chunks_encoded_total"):
            assert value(second, name, mount=mount) > value(first, name, mount=mount) > 0, name
        for operation in ("open", "read", "write", "fsync"):
            count = value(second, "zarrfs_fuse_request_seconds_count", mount=mount, operation=operation)
            assert count > 0, operation
            inf = value(second, "zarrfs_fuse_request_seconds_bucket", operation=operation, le="+Inf")
            assert inf == count
        for operation in ("get", "put"):
            assert value(second, "zarrfs_store_request_seconds_count", operation=operation, outcome="ok") > 0
        assert value(second, "zarrfs_store_request_seconds_count", outcome="timeout") == 0
        assert value(second, "zarrfs_cache_limit_bytes", mount=mount) == 256 << 20
        assert value(second, "zarrfs_cache_bytes", mount=mount) > 0
        for gauge in ("zarrfs_dirty_bytes", "zarrfs_readahead_bytes", "zarrfs_requests_in_flight",
                      "zarrfs_store_requests_in_flight"):
            assert (gauge, frozenset({("mount", mount)})) in second, gauge
        # The workload stopped: once the kernel's last requests (a release is sent after the
        # close returns) are answered, none is in flight (a scrape is not a FUSE request).
        deadline = time.monotonic() + 30
        while value(scrape(m.metrics_address), "zarrfs_requests_in_flight") != 0:
            assert time.monotonic() < deadline, "requests stay in flight"
            time.sleep(0.05)
        assert all(dict(labels).get("mount") == mount for _, labels in second), "a series without `mount`"
        # Every `zarrfs stats` counter is a series.
        for name in m.stats():
            assert any(n.startswith(f"zarrfs_{name}") for n, _ in second), name
    with pytest.raises(urllib.error.URLError):
        scrape(m.metrics_address)  # the endpoint ends with the daemon


def _after_fsyncs(address: str, fsyncs: float) -> Samples:
    """A scrape once the mount has answered at least `fsyncs` fsync requests (the workload's
    rounds; 60 s at most)."""
    deadline = time.monotonic() + 60
    while True:
        samples = scrape(address)
        if _fsyncs(samples) >= fsyncs or time.monotonic() > deadline:
            return samples
        time.sleep(0.1)


def _fsyncs(samples: Samples) -> float:
    return value(samples, "zarrfs_fuse_request_seconds_count", operation="fsync")


def test_the_mount_label_has_no_credentials(source: Path, tmp_path: Path) -> None:
    with serving(tmp_path) as server:
        host = server.url.removeprefix("http://")
        url = f"http://user-x7q:s3cret-word@{host}/array.zarr"
        with zarrfs.mount(url, metrics="127.0.0.1:0") as m:
            assert (m.path / "data").read_bytes()[:4] == np.float32(0).tobytes()
            with urllib.request.urlopen(f"http://{m.metrics_address}/metrics", timeout=10) as answer:
                text = answer.read().decode()
    assert "s3cret" not in text and "user-x7q" not in text
    samples = {(s.name, frozenset(s.labels.items())): s.value
               for family in text_string_to_metric_families(text) for s in family.samples}
    assert value(samples, "zarrfs_store_request_seconds_count", mount=f"http://{host}/array.zarr") > 0


def test_a_silent_store_shows_as_timeouts(source: Path, tmp_path: Path) -> None:
    """A partition (connections accepted, nothing answered): the read fails at the deadline,
    and the scrape counts the store operation that timed out, by its kind."""
    with serving(tmp_path) as server, proxied(int(server.url.rsplit(":", 1)[1])) as proxy:
        url = f"http://127.0.0.1:{proxy.port}/array.zarr"
        with zarrfs.mount(url, metrics="127.0.0.1:0", timeout=2, recheck="never") as m:
            assert m.metrics_address is not None
            assert value(scrape(m.metrics_address), "zarrfs_store_timeouts_total") == 0
            with open(m.path / "data", "rb") as f:
                proxy.swallow()
                with pytest.raises(OSError) as raised:
                    f.read(4096)
                assert raised.value.errno == errno.EIO
                deadline = time.monotonic() + 20  # (the abandoned store call ends at its own deadline)
                while value(samples := scrape(m.metrics_address), "zarrfs_store_timeouts_total") == 0:
                    assert time.monotonic() < deadline, "no store timeout counted"
                    time.sleep(0.2)
                proxy.heal()
    timed_out = value(samples, "zarrfs_store_request_seconds_count", outcome="timeout")
    assert timed_out == value(samples, "zarrfs_store_timeouts_total") > 0
    assert value(samples, "zarrfs_store_request_seconds_sum", outcome="timeout") >= 2 * timed_out * 0.9
    assert value(samples, "zarrfs_store_timeouts_total", operation="get") > 0


def test_a_503_shows_as_a_retry(source: Path, tmp_path: Path) -> None:
    """A store briefly unavailable (503s): the read is retried within its deadline and
    succeeds, and the retries are counted by the kind of operation retried."""
    with serving(tmp_path) as server, \
            zarrfs.mount(f"{server.url}/array.zarr", metrics="127.0.0.1:0", recheck="never") as m:
        assert m.metrics_address is not None
        with open(m.path / "data", "rb") as f:
            server.unavailable = 2
            head = f.read(8)
        samples = scrape(m.metrics_address)
    assert head == np.arange(2, dtype="<f4").tobytes()
    assert value(samples, "zarrfs_store_retries_total", operation="get") == 2
    assert value(samples, "zarrfs_store_request_seconds_count", operation="get", outcome="ok") > 0
    assert value(samples, "zarrfs_store_request_seconds_count", outcome="error") == 0


@pytest.mark.fast
@pytest.mark.parametrize(("url", "label"), [
    ("s3://bucket/a.zarr", "s3://bucket/a.zarr"),
    ("https://user:pw@example.org/a.zarr", "https://example.org/a.zarr"),
    ("https://example.org/a.zarr?X-Amz-Signature=abc&X-Amz-Credential=k#x", "https://example.org/a.zarr"),
    ("simplecache::https://u:p@h/a.zarr?sig=1", "simplecache::https://h/a.zarr"),
])
def test_public_source(url: str, label: str) -> None:
    assert public_source(url) == label


@pytest.mark.fast
@pytest.mark.parametrize(("text", "address"), [
    ("127.0.0.1:9464", ("127.0.0.1", 9464)), ("0.0.0.0:0", ("0.0.0.0", 0)), ("[::1]:9464", ("::1", 9464)),
    ("node-7.local:80", ("node-7.local", 80)),
])
def test_the_option_parses(text: str, address: tuple[str, int]) -> None:
    assert MountOptions.parse([f"ro,metrics={text}"]).metrics == address
    assert MountOptions.parse(["ro"]).metrics is None


@pytest.mark.fast
@pytest.mark.parametrize("text", ["9464", ":9464", "127.0.0.1:", "127.0.0.1:http", "127.0.0.1:70000", ""])
def test_a_bad_address_is_refused(text: str) -> None:
    with pytest.raises(OptionError, match="metrics"):
        MountOptions.parse([f"metrics={text}"])


def test_a_port_in_use_fails_the_mount_with_its_reason(source: Path, tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        mountpoint = tmp_path / "mnt"
        mountpoint.mkdir()
        started = time.monotonic()
        result = subprocess.run([sys.executable, "-m", "zarrfs.cli", "mount", str(source), str(mountpoint),
                                 "-o", f"metrics={address}"], capture_output=True, text=True, timeout=60)
        assert result.returncode == 1
        assert f"cannot serve metrics on {address}: Address already in use" in result.stderr
        assert time.monotonic() - started < 10
        assert not is_mounted(mountpoint)
        with pytest.raises(MountError, match="Address already in use"):
            zarrfs.mount(source, metrics=address)


def test_no_metrics_by_default(source: Path) -> None:
    with zarrfs.mount(source) as m:
        assert m.metrics_address is None
        assert "serving metrics" not in m.log()
        served = subprocess.run(["ss", "-Htlnp"], capture_output=True, text=True).stdout
        assert f"pid={m.process.pid}," not in served  # the daemon listens on no TCP port
