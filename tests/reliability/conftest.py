"""Fixtures of the reliability suite: the fault-injecting filesystem, a local S3 server, the
coherence soak's totals, the targets of two mounts (test_two_mounts_*.py) and a mount through a
partition (test_partition_*.py).

The repository root goes on sys.path so that ``tests.helpers.faulty_fs`` imports under that
one name whatever pytest's import mode (a daemon started later imports ``faulty_fs`` by the same
name, and fsspec finds it by it).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
import zarr  # noqa: E402

from tests.helpers import faulty_fs  # noqa: E402
from tests.helpers.coherence import SOAK_RUNS, TOTALS, report  # noqa: E402
from tests.helpers.mounting import Mount  # noqa: E402
from tests.helpers.netproxy import TcpProxy, proxied  # noqa: E402
from tests.helpers.partition_mounts import (  # noqa: E402
    CHUNKS,
    SHAPE,
    TIMEOUT,
    VALUES,
    mounted_logging,
    read_array,
    storage_options,
)
from tests.helpers.s3_server import S3Server, free_port, serving  # noqa: E402
from tests.helpers.two_mount_targets import Target, make_target  # noqa: E402


@pytest.fixture(autouse=True, scope="session")
def _register_faulty() -> None:
    faulty_fs.register()


@pytest.fixture
def s3_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[S3Server]:
    """A fresh moto S3 server with an empty bucket; stopped at the end whatever happens."""
    yield from serving(S3Server(free_port()), monkeypatch)


@pytest.fixture(scope="session", autouse=True)
def _coherence_totals(request: pytest.FixtureRequest) -> Iterator[None]:
    """The coherence soak's totals over its runs (test_coherence_rounds.py, _torn.py), once."""
    yield
    if SOAK_RUNS > 1 and TOTALS:
        report(request, {"test": "coherence-totals", "runs": SOAK_RUNS, **TOTALS},
               f"coherence totals over {SOAK_RUNS} runs: {TOTALS['rounds']} rounds, "
               f"{TOTALS['reads_checked']} reads checked, {TOTALS['stale']} stale, "
               f"{TOTALS['torn']} torn, {TOTALS['corrupt']} corrupt; background: "
               f"{TOTALS['background_writes']} writes, {TOTALS['background_read_backs']} read "
               f"backs, {TOTALS['background_mismatches']} mismatches; torn reads (one reply): "
               f"{TOTALS['torn chunk_rewrites']} rewrites, {TOTALS['torn uniform_reads']} reads, "
               f"{TOTALS['torn non_uniform']} non-uniform; torn reads (many pages): "
               f"{TOTALS['torn-pages chunk_rewrites']} rewrites, "
               f"{TOTALS['torn-pages uniform_reads']} reads, "
               f"{TOTALS['torn-pages non_uniform']} non-uniform")


@pytest.fixture(params=["local", "s3"])
def kind(request: pytest.FixtureRequest) -> str:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture(params=["plain", "sharded"])
def sharded(request: pytest.FixtureRequest) -> bool:
    return request.param == "sharded"  # type: ignore[no-any-return]


@pytest.fixture
def target(kind: str, sharded: bool, request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    return make_target(kind, sharded, request, tmp_path)


@pytest.fixture(params=["no-log", "log-file"])
def logging_to(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def partitioned(s3_server: S3Server, tmp_path: Path,
                logging_to: str) -> Iterator[tuple[Mount, TcpProxy, S3Server]]:
    """A group of two arrays in S3, mounted through a proxy; the first array read whole."""
    group = zarr.open_group(f"s3://{s3_server.bucket}/group", mode="w",
                            storage_options=storage_options(s3_server))
    for name, values in VALUES.items():
        group.create_array(name, shape=SHAPE, chunks=CHUNKS, dtype="<f4", fill_value=0)[...] = values
    with proxied(s3_server.port) as proxy:
        # direct_io: every read reaches the daemon, so "cached" means the daemon's chunk cache.
        options = [f"endpoint_url={proxy.url}", f"timeout={TIMEOUT:g}", "direct_io"]
        source = f"s3://{s3_server.bucket}/group"
        with mounted_logging(logging_to, source, tmp_path / "mnt", options) as mount:
            cached = read_array(mount, "cached")
            assert np.array_equal(cached, VALUES["cached"])
            assert sorted(os.listdir(mount.path)) == ["cached", "data.h5", "data.nc", "uncached", "zarr.json"]
            assert sorted(os.listdir(mount.path / "uncached")) == sorted(os.listdir(mount.path / "cached"))
            yield mount, proxy, s3_server
