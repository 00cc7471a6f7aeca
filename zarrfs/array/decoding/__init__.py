"""Decoding in processes of their own (issue 77): the fork server the daemon forks at its start
(`server`), the workers it forks (`worker`), the daemon's pool of them (`pool`), the slabs of
shared memory they decode into (`slabs`), the messages between them (`wire`), and the chunks
they read from a local store's files themselves (`files`). Written chunks are encoded there too
(issue 87): the daemon's end is `staging`, the worker's `encoding`."""

from .files import (
           MISSING,
           READ,
           REFERRED,
           ChunkFileReader,
           ChunkFiles,
           FilesJob,
           FilesRead,
           ShardPart,
           states_of,
)
from .pool import DecodePool, Item, WorkerFailed, close_files
from .server import Drop, ForkServer
from .slabs import SharedSlab, SlabKeeper
from .staging import NoRoom, NotEncoded, ProcessEncoder

__all__ = [
           "MISSING",
           "READ",
           "REFERRED",
           "ChunkFileReader",
           "ChunkFiles",
           "DecodePool",
           "Drop",
           "FilesJob",
           "FilesRead",
           "ForkServer",
           "Item",
           "NoRoom",
           "NotEncoded",
           "ProcessEncoder",
           "ShardPart",
           "SharedSlab",
           "SlabKeeper",
           "WorkerFailed",
           "close_files",
           "states_of",
]
