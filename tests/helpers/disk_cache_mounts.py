"""What the tests of the disk cache through real mounts (tests/store/disk_cache/test_disk_cache_*.py
of moto S3) share: the mount options, the whole array read through `data`, a chunk put behind
the mount's back, and the values the twin array holds."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.mounting import Mount
from tests.helpers.s3_server import S3Server
from tests.helpers.scale_arrays import values

GRID, CHUNK = (8, 8), (64, 64)
SHAPE = (GRID[0] * CHUNK[0], GRID[1] * CHUNK[1])


def options(server: S3Server, directory: Path, *more: str) -> list[str]:
    return [f"endpoint_url={server.endpoint_url}", f"disk_cache={directory}", *more]


def whole(mount: Mount) -> bytes:
    return mount.data.read_bytes()


EXPECTED = values((0, 0), SHAPE).tobytes()
