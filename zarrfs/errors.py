"""The error types of zarrfs. Each inherits the builtin it resembles; the fuse layer maps
them to errno values in one place."""

from __future__ import annotations


class ZarrfsError(Exception):
    """Base of every error zarrfs raises on purpose."""


class MetadataError(ZarrfsError, ValueError):
    """`zarr.json` is invalid or uses something zarrfs does not support.

    The message names the member, e.g. ``chunk_grid.configuration.chunk_shape: ...``."""

    def __init__(self, member: str, problem: str) -> None:
        self.member = member
        self.problem = problem
        super().__init__(f"{member}: {problem}" if member else problem)


class ChunkError(ZarrfsError):
    """A stored chunk or shard cannot be decoded. Names the store key."""

    def __init__(self, key: str, problem: str) -> None:
        self.key = key
        self.problem = problem
        super().__init__(f"chunk {key!r}: {problem}")


class StoreError(ZarrfsError, OSError):
    """The store failed to read, write, delete or list a key (None: a request as a whole,
    not one key). `errno` is the cause's, where the cause was a system error (a full disk:
    ENOSPC)."""

    def __init__(self, key: str | None, problem: str, errno: int | None = None) -> None:
        self.key = key
        self.problem = problem
        super().__init__(problem if key is None else f"store key {key!r}: {problem}")
        self.errno = errno


class StoreTimeout(StoreError):
    """The store did not answer within its deadline (a remote store: `-o timeout=`)."""


class RefusedKey(StoreError):
    """A key the store will not serve, for good: a link leading outside a local store, a FIFO
    or device where a file should be, a file the daemon's user may not read. Like a malformed
    document (and unlike a fault), it says nothing of the rest of the store."""


class ReadOnlyError(ZarrfsError, PermissionError):
    """A write was attempted on a read-only array or store."""


class ResizeError(ZarrfsError, ValueError):
    """A size or shape an array cannot take (a partial row, rank 0, too large): EINVAL."""


class ConflictError(ZarrfsError):
    """A conditional write found the stored object changed since it was read (another writer
    got there first): re-read, merge and retry. Not an OSError, so it is never retried blindly.
    A commit (Icechunk) may find several: `keys`."""

    def __init__(self, key: str, *others: str) -> None:
        self.key = key
        self.keys = (key, *others)
        more = f" (and {len(others)} more)" if others else ""
        super().__init__(f"store key {key!r}{more} changed since it was read")


class MountError(ZarrfsError):
    """A mount cannot be made, or did not end well; the message is the one line the user sees
    (from the Python API: with the daemon's last words)."""


class MountNotAnswering(MountError):
    """A probe of a mountpoint did not return in time: its daemon is stuck (the message says
    how to abort the mount)."""


class EditRefused(ZarrfsError):
    """A change to the tree refused (a request the user may get wrong, not a fault), with the
    errno that says why (EINVAL, EEXIST, ENOTEMPTY...)."""

    def __init__(self, code: int, problem: str) -> None:
        self.errno = code
        super().__init__(problem)


# Optional packages zarrfs may need, and the extra of zarrfs that installs each.
EXTRAS = {"obstore": "s3", "s3fs": "s3", "aiobotocore": "s3", "botocore": "s3", "gcsfs": "gcs",
          "adlfs": "azure", "azure": "azure",
          "aiohttp": "http", "icechunk": "icechunk", "pcodec": "codecs", "zfpy": "codecs",
          "pandas": "references", "fastparquet": "references", "wsgidav": "serve", "cheroot": "serve"}


def missing_package(error: BaseException) -> str | None:
    """"the package P is missing: pip install 'zarrfs[EXTRA]'" when `error`, or what caused
    it (fsspec says "Install adlfs to ..." for a failed import), is a failed import."""
    found: BaseException | None = error
    while found is not None:
        if isinstance(found, ImportError) and found.name:
            package = found.name.split(".")[0]
            extra = EXTRAS.get(package)
            return f"the package {package} is missing" + (f": pip install 'zarrfs[{extra}]'" if extra else "")
        found = found.__cause__ or found.__context__
    return None
