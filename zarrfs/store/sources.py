"""Which fsspec filesystem serves a source, in one place.

Most sources are a local path or an fsspec URL (s3://, gs://, https://, memory://). Two kinds
need a filesystem of zarrfs's own: a kerchunk/VirtualiZarr reference set (a `.json` file, a
Parquet reference directory, or `reference://` with `fo=`), whose chunk bytes live in other
files (`references`), and an Icechunk repository (`icechunk://`), whose keys resolve through
a snapshot (`icechunk`). Both are asynchronous fsspec filesystems, so every call the store
makes to them has a deadline, as it has for S3 or HTTP.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import fsspec

DEFAULT_REMOTE_TIMEOUT = 30.0
# Filesystems that cache listings: generations must be the store's, not a listing cached when
# the mount began.
LISTING_CACHES = {"s3", "s3a", "gs", "gcs", "abfs", "az"}
GCS = {"gs", "gcs"}
# Sources that are never written through: a write mount of them falls back to read-only.
READ_ONLY_PROTOCOLS = {"http", "https", "reference", "icechunk"}


@dataclass(frozen=True)
class SourceSettings:
    """What a source needs beyond fsspec's storage options."""

    # The longest one store operation may take, retries included (None: 30 s for remote
    # stores; local files are not bounded).
    timeout: float | None = None
    # Icechunk: the branch, tag or snapshot id to mount (None: the branch `main`).
    ref: str | None = None
    # `reference://` sources: the reference file or directory.
    fo: str | None = None
    # Reference sets: where referenced bytes may come from besides the reference set's own
    # directory (local) or bucket/host (remote).
    references_allow: tuple[str, ...] = ()

    def timeout_for(self, fs: fsspec.AbstractFileSystem) -> float | None:
        """The bound on one operation of `fs`: none for local files (a system call cannot be
        abandoned, and a local disk is not a network)."""
        if _is_local(fs):
            return None
        return DEFAULT_REMOTE_TIMEOUT if self.timeout is None else self.timeout


def open_filesystem(url: str, storage_options: Mapping[str, Any],
                    settings: SourceSettings) -> tuple[fsspec.AbstractFileSystem, str]:
    """The filesystem and root path that serve `url`. Raises ValueError, ImportError or
    OSError when it cannot be opened."""
    protocol = fsspec.utils.get_protocol(url)
    options = dict(storage_options)
    if protocol == "icechunk":
        from . import icechunk

        return icechunk.open_filesystem(url, options, settings)
    from . import references

    if protocol == "reference" or references.is_reference_source(url, options):
        return references.open_filesystem(url, options, settings)
    if protocol in LISTING_CACHES:
        options.setdefault("use_listings_cache", False)
    if protocol in GCS:
        options = _gcs_options(options)
    fs, root = fsspec.core.url_to_fs(url, **options)
    return fs, root


def _gcs_options(options: dict[str, Any]) -> dict[str, Any]:
    """`endpoint_url=` reaches an emulator or a private endpoint: gcsfs takes it as a keyword
    of its own, not among botocore's client arguments."""
    client = dict(options.pop("client_kwargs", None) or {})
    endpoint = client.pop("endpoint_url", None)
    if endpoint is not None:
        options.setdefault("endpoint_url", endpoint)
    if options.get("endpoint_url") or os.environ.get("STORAGE_EMULATOR_HOST"):
        # gcsfs >= 2026.10 (when imported after this) asks the endpoint for the bucket's type
        # over gRPC before its operations; an emulator or a JSON-only endpoint never answers,
        # which costs 60 s per operation (a failed answer is not cached). zarrfs reads and
        # writes through the JSON API only. The user's own setting wins.
        os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
    if options.pop("anon", False):
        options.setdefault("token", "anon")
    return options


def is_read_only(fs: fsspec.AbstractFileSystem) -> bool:
    protocols = {fs.protocol} if isinstance(fs.protocol, str) else set(fs.protocol)
    return bool(protocols & READ_ONLY_PROTOCOLS)


def _is_local(fs: fsspec.AbstractFileSystem) -> bool:
    from fsspec.implementations.local import LocalFileSystem

    return isinstance(fs, LocalFileSystem)
