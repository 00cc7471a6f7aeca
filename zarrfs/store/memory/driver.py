"""The driver of fsspec's in-memory filesystem (memory://: tests, and data made by the process
that mounts it): the defaults of any fsspec filesystem, writable, with no generations."""

from __future__ import annotations

from ..driver import Driver

PROTOCOLS = ("memory",)


class MemoryDriver(Driver):
    pass
