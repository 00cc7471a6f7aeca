"""Decoding in processes of their own (issue 77): the fork server the daemon forks at its start
(`server`), the workers it forks (`worker`), the daemon's pool of them (`pool`), the slabs of
shared memory they decode into (`slabs`) and the messages between them (`wire`)."""

from .pool import DecodePool, Item, WorkerFailed, close_files
from .server import Drop, ForkServer
from .slabs import SharedSlab, SlabKeeper

__all__ = ["DecodePool", "Drop", "ForkServer", "Item", "SharedSlab", "SlabKeeper", "WorkerFailed",
           "close_files"]
