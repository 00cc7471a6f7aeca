"""What the partition tests (tests/reliability/test_partition_*.py) share: the array on moto S3,
the timeouts they hold the mount to, a mount in either logging configuration an operator has
(the daemon forked with no log destination, and `-o log=FILE`; the fixture `logging_to`,
tests/reliability/conftest.py), and the checks of EIO and of what was logged."""

from __future__ import annotations

import contextlib
import errno
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from tests.helpers.mounting import Mount, mounted
from tests.helpers.s3_server import S3Server

TIMEOUT = 4.0  # -o timeout= of these mounts
RECHECK_BOUND = 2.0  # what a check may wait for the store (zarrfs.store.settings.CHECK_SECONDS)
SLACK = 1.5  # scheduling on a busy 2-core machine
AT_ONCE = 0.5
SHAPE = (128, 256)
CHUNKS = (32, 32)
VALUES = {name: np.arange(SHAPE[0] * SHAPE[1], dtype="<f4").reshape(SHAPE) * sign
          for name, sign in (("cached", 1), ("uncached", -1))}


def storage_options(server: S3Server) -> dict[str, Any]:
    return {"endpoint_url": server.endpoint_url, "key": "testing", "secret": "testing"}


@contextlib.contextmanager
def mounted_logging(logging_to: str, source: str, mountpoint: Path,
                    options: list[str]) -> Iterator[Mount]:
    """`source` mounted with the daemon logging nowhere (forked, no `log=`) or to a file."""
    if logging_to == "no-log":
        with mounted(source, mountpoint, options, foreground=False) as mount:
            yield mount
        return
    log = mountpoint.parent / "daemon.log"
    with mounted(source, mountpoint, [*options, f"log={log}"]) as mount:
        mount.log_path = log
        yield mount


def assert_logged(mount: Mount, logging_to: str, pattern: str) -> None:
    if logging_to == "log-file":
        assert re.search(pattern, mount.log()), mount.log()


def read_array(mount: Mount, name: str) -> np.ndarray:
    return np.frombuffer((mount.path / name / "data").read_bytes(), "<f4").reshape(SHAPE)


def assert_eio(result: Any) -> None:
    assert isinstance(result, OSError) and result.errno == errno.EIO, result


def mount_stats_dirty(mount: Mount) -> int:
    import json

    stats = json.loads(os.getxattr(mount.path, "user.zarrfs.stats"))
    return int(stats["dirty_bytes"])
