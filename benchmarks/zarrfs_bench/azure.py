"""The latency section's Azure column: the same arrays on Azurite (the tests' server,
tests/helpers/azurite_server.py, an npm package `scripts/install` installs), read by a
zarrfs mount of `az://` through the same delaying proxy as S3."""

from __future__ import annotations

import contextlib
import importlib
import sys
import time
from collections.abc import Iterator
from typing import Any

from .arrays import Config
from .common import REPO, dir_files, fmt_size, log


def azurite_module() -> Any:
    """tests/helpers/azurite_server.py (it imports the tests package: the repository goes
    on sys.path)."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    return importlib.import_module("tests.helpers.azurite_server")


@contextlib.contextmanager
def azurite() -> Iterator[Any]:
    """A running Azurite with an empty container (an AzuriteServer); stopped at the end."""
    module = azurite_module()
    if module.azurite_command() is None:
        raise RuntimeError("Azurite is not installed (scripts/install installs it with npm)")
    with module.running() as server:
        yield server


def upload(cfg: Config, server: Any, prefix: str) -> None:
    """The array's files (as TensorStore wrote them) to az://CONTAINER/prefix/."""
    import adlfs

    fs = adlfs.AzureBlobFileSystem(**server.adlfs_options(skip_instance_cache=True))
    files = dir_files(cfg.path)
    t0 = time.perf_counter()
    fs.put([str(p) for p in files], [f"{server.container}/{prefix}/{p.relative_to(cfg.path)}" for p in files])
    log(f"uploaded {cfg.name} to Azurite ({fmt_size(cfg.stored)}, {len(files)} blobs) "
        f"in {time.perf_counter() - t0:.1f} s")
