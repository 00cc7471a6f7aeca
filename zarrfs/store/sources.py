"""Which fsspec filesystem serves a source, and which driver serves that filesystem: the one
place of `store/` that maps a URL to a backend (as fsspec's `registry.py`).

Most sources are a local path or an fsspec URL (s3://, gs://, https://, memory://). Two kinds
need a filesystem of zarrfs's own: a kerchunk/VirtualiZarr reference set (a `.json` file, a
Parquet reference directory, or `reference://` with `fo=`), whose chunk bytes live in other
files (`references`), and an Icechunk repository (`icechunk://`), whose keys resolve through
a snapshot (`icechunk`). Both are asynchronous fsspec filesystems, so every call the store
makes to them has a deadline, as it has for S3 or HTTP. A zip archive is read through the
store of its directory (`adapter_of`: its adapter, `zipfiles.ZipSource`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import fsspec
from fsspec.implementations.local import LocalFileSystem
from fsspec.registry import known_implementations, registry

from ..declared import Option
from ..errors import StoreError, missing_package
from . import deadline, http, icechunk, memory, objects, references
from .deadline import RetryPolicy, one_line
from .driver import Adapter, Driver
from .local import LocalDriver
from .references import ReferencesDriver
from .settings import TIMEOUT, SourceOptions
from .zipfiles import ZipDriver, ZippedFileSystem, ZipSource

# Opening a remote store first tries to connect to its server, this long at most: a refused
# connection or an unknown host fails the opening at once (deadline.reach).
REACH_SECONDS = 2.0

# Filesystems that cache listings: generations must be the store's, not a listing cached when
# the mount began.
LISTING_CACHES = {"s3", "s3a", "gs", "gcs", *objects.AZURE_PROTOCOLS}


# The mount options of the store: its own, and those each family declares (each reads its own
# from the options a source is opened with: `SourceOptions`).
OPTIONS: tuple[Option[Any], ...] = (TIMEOUT, *objects.OPTIONS, *references.OPTIONS, *icechunk.OPTIONS)


def storage_options(options: SourceOptions) -> dict[str, Any]:
    """fsspec's keywords for a source opened with `options`: the object stores' options made
    into theirs, over a program's own (`SourceOptions.client`)."""
    return {**options.client, **objects.storage_options(options.given)}


@dataclass(frozen=True)
class Source:
    """An opened source: the driver serving it and its root there, and how the store of it is
    bounded (None: the store's default)."""

    root: str
    driver: Driver
    read_only: bool
    retry: RetryPolicy | None


def open_source(url: str, settings: SourceOptions, *, read_only: bool, writable: bool) -> Source:
    """`url` opened (StoreError: it cannot be), its server reached first when it has one."""
    try:
        fs, root = open_filesystem(url, settings)
        driver = driver_for(fs, root, settings)
        read_only = read_only or not driver.start_writes(writable and not read_only)
    except (ValueError, ImportError, OSError) as e:
        raise StoreError(url, f"cannot open: {missing_package(e) or one_line(e)}") from None
    timeout = settings.timeout_for(remote=driver.capabilities.round_trips)
    retry = None if timeout is None else RetryPolicy(deadline_seconds=timeout)
    server = endpoint(url, settings)
    if server is not None and timeout is not None:
        deadline.reach(server, min(timeout, REACH_SECONDS))
    return Source(root, driver, read_only or driver.capabilities.read_only, retry)


def driver_for(fs: fsspec.AbstractFileSystem, root: str, settings: SourceOptions | None = None) -> Driver:
    """The driver of the backend family `fs` belongs to (`settings`: as the mount's options say,
    for a family that reads one as it serves)."""
    if isinstance(fs, LocalFileSystem):
        return LocalDriver(fs, root, settings or SourceOptions())
    for is_family, family in ((objects.is_s3, objects.S3Driver), (objects.is_gcs, objects.GcsDriver),
                              (objects.is_azure, objects.AzureDriver)):
        if is_family(fs):
            return family(fs)
    if getattr(fs, "reads_report_generations", False):  # (Icechunk: its client is loaded already)
        from .icechunk import IcechunkDriver

        return IcechunkDriver(fs)
    if isinstance(fs, ZippedFileSystem):
        return ZipDriver(fs)
    protocols = {fs.protocol} if isinstance(fs.protocol, str) else set(fs.protocol)
    if protocols & set(http.PROTOCOLS):
        return http.HttpDriver(fs)
    if "reference" in protocols:
        return ReferencesDriver(fs)
    return memory.MemoryDriver(fs) if protocols & set(memory.PROTOCOLS) else Driver(fs)


def adapter_of(url: str) -> Adapter | None:
    """What `url` is read through the store of another with (a zip archive: through the store
    of its directory); None: a source of its own."""
    return ZipSource.parse(url)


def open_filesystem(url: str, settings: SourceOptions) -> tuple[fsspec.AbstractFileSystem, str]:
    """The filesystem and root path that serve `url`. Raises ValueError, ImportError or
    OSError when it cannot be opened."""
    protocol = fsspec.utils.get_protocol(url)
    options = storage_options(settings)
    if protocol == "icechunk":
        from .icechunk import open_filesystem as open_repository  # (its client: only when asked)

        return open_repository(url, options, settings)
    from .references import is_reference_source
    from .references import open_filesystem as open_references

    if protocol == "reference" or is_reference_source(url, options):
        return open_references(url, options, settings)
    if protocol in LISTING_CACHES:
        options.setdefault("use_listings_cache", False)
    if protocol in objects.GCS_PROTOCOLS:
        options = objects.gcs_options(options)
    if protocol in objects.AZURE_PROTOCOLS:
        options = objects.azure_options(options)
    fs, root = fsspec.core.url_to_fs(url, **options)
    return fs, root


def endpoint(url: str, settings: SourceOptions) -> str | None:
    """The address of the server a source names: an http(s) source itself, the endpoint of
    S3, GCS or Azure when one is set (None: the cloud's own, or no server at all)."""
    protocol = fsspec.utils.get_protocol(url)
    if protocol in ("http", "https"):
        return url
    if protocol not in ("s3", "s3a", *objects.GCS_PROTOCOLS, *objects.AZURE_PROTOCOLS):
        return None
    keywords = storage_options(settings)
    client = keywords.get("client_kwargs") or {}
    found = keywords.get("endpoint_url") or client.get("endpoint_url")
    if found is None and protocol in objects.GCS_PROTOCOLS:
        emulator = os.environ.get("STORAGE_EMULATOR_HOST")
        found = emulator if emulator is None or "://" in emulator else f"http://{emulator}"
    return str(found) if found else None


# The loggers of the stores' clients, which log request headers and URLs, credentials included
# (the Azure SDK every request and response, headers and all, at INFO): a daemon keeps them
# at WARNING, even with debug.
CLIENT_LOGGERS = ("fsspec", "s3fs", "botocore", "aiobotocore", "urllib3", "aiohttp", "gcsfs", "adlfs",
                  "azure")


# -- what a source imports late ------------------------------------------------------------------

# A source's own, past fsspec's filesystem (`late_imports`): the clients zarrfs imports only when
# a store of theirs is opened or read.
_CLIENTS: dict[str, tuple[str, ...]] = {
    # S3 reads through obstore when it is installed (else botocore: silently, when it fails to
    # import), and presigned GETs through aiohttp.
    **dict.fromkeys(("s3", "s3a"), ("obstore", "obstore.store", "obstore.exceptions", "aiohttp")),
    **dict.fromkeys(objects.GCS_PROTOCOLS, ("gcsfs.retry",)),
    **dict.fromkeys(objects.AZURE_PROTOCOLS, ("azure.core", "azure.core.exceptions")),
    "icechunk": ("zarrfs.store.icechunk.versions", "icechunk"),
}
# Any store but a local directory (a remote one, a zip archive, a reference set, Icechunk):
# the store imports the errors its clients may raise, to tell those worth retrying
# (deadline.error_kinds), and takes them for absent when the import fails.
_CLIENT_ERRORS = ("botocore.exceptions", "aiohttp")
# A source reached over the network: its host's name is looked up, encoded by the idna codec,
# which Python imports at its first use (a bare `LookupError: unknown encoding: idna`).
_NETWORK = ("encodings.idna",)
_LOCAL = {"file", "local", "memory"}
# The names of a reference set (JSON, Parquet), as `references` knows them.
_REFERENCE_SUFFIXES = (".json", ".json.gz", ".parq", ".parquet")
# A zip archive's names not flagged UTF-8 are code page 437, a codec Python imports at its
# first use.
_ZIP = ("encodings.cp437",)


@dataclass(frozen=True)
class LateImports:
    """What opening and serving a source imports after the store opens: `modules`, and, for a
    reference set (whose chunks name codecs of other packages), whether it is one."""

    modules: tuple[str, ...]
    reference: bool


def late_imports(source: str, options: SourceOptions) -> LateImports:
    """What the store of `source` imports late (a daemon acting as another user imports them
    first, as root: zarrfs.daemon.preload). Looks at nothing remote, reads nothing, and
    imports nothing: it only names them."""
    adapter = adapter_of(source)
    url = source if adapter is None else adapter.below
    protocol = fsspec.utils.get_protocol(url)
    reference = _is_reference(url, protocol, storage_options(options))
    modules = (*_filesystem_module(protocol), *_CLIENTS.get(protocol, ()),
               *(_ZIP if adapter is not None else ()), *(_NETWORK if protocol not in _LOCAL else ()),
               *(_CLIENT_ERRORS if protocol not in _LOCAL or adapter is not None or reference else ()))
    return LateImports(modules, reference)


def _filesystem_module(protocol: str) -> tuple[str, ...]:
    """The module of fsspec's filesystem of `protocol` (s3fs, gcsfs, adlfs, its http one:
    aiohttp), which the store imports when it opens it; () where fsspec knows none."""
    registered = registry.get(protocol)
    if registered is not None:
        return (registered.__module__,)
    known = known_implementations.get(protocol, {}).get("class")
    return (known.rpartition(".")[0],) if isinstance(known, str) and "." in known else ()


def _is_reference(url: str, protocol: str, storage_options: Mapping[str, Any]) -> bool:
    """Whether `url` names a reference set: by its name, and a local one by a stat (never a
    request, nor a read, as root)."""
    if protocol == "reference" or url.rstrip("/").endswith(_REFERENCE_SUFFIXES):
        return True
    if protocol not in _LOCAL:
        return False
    from .references import is_reference_source

    try:
        return bool(is_reference_source(url, dict(storage_options)))
    except Exception:  # (a source it cannot look at: the store says why, as the user)
        return False
