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
from typing import Any

import fsspec

from . import objects
from .settings import SourceSettings

# Filesystems that cache listings: generations must be the store's, not a listing cached when
# the mount began.
LISTING_CACHES = {"s3", "s3a", "gs", "gcs", *objects.AZURE_PROTOCOLS}
# Azurite's development account, as `UseDevelopmentStorage=true` names it (published, the
# same in every Azurite: not a secret).
AZURITE_ACCOUNT = {
    "AccountName": "devstoreaccount1",
    "AccountKey": "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==",
}
# Sources that are never written through: a write mount of them falls back to read-only.
# (Icechunk is written at a branch with -o rw only: `Store.open`, `start_writes`.)
READ_ONLY_PROTOCOLS = {"http", "https", "reference"}


def open_filesystem(url: str, storage_options: Mapping[str, Any],
                    settings: SourceSettings) -> tuple[fsspec.AbstractFileSystem, str]:
    """The filesystem and root path that serve `url`. Raises ValueError, ImportError or
    OSError when it cannot be opened."""
    protocol = fsspec.utils.get_protocol(url)
    options = dict(storage_options)
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
        options = _gcs_options(options)
    if protocol in objects.AZURE_PROTOCOLS:
        options = _azure_options(options)
    fs, root = fsspec.core.url_to_fs(url, **options)
    return fs, root


def endpoint(url: str, storage_options: Mapping[str, Any]) -> str | None:
    """The address of the server a source names: an http(s) source itself, the endpoint of
    S3, GCS or Azure when one is set (None: the cloud's own, or no server at all)."""
    protocol = fsspec.utils.get_protocol(url)
    if protocol in ("http", "https"):
        return url
    if protocol not in ("s3", "s3a", *objects.GCS_PROTOCOLS, *objects.AZURE_PROTOCOLS):
        return None
    client = storage_options.get("client_kwargs") or {}
    found = storage_options.get("endpoint_url") or client.get("endpoint_url")
    if found is None and protocol in objects.GCS_PROTOCOLS:
        emulator = os.environ.get("STORAGE_EMULATOR_HOST")
        found = emulator if emulator is None or "://" in emulator else f"http://{emulator}"
    return str(found) if found else None


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


def _azure_options(options: dict[str, Any]) -> dict[str, Any]:
    """`endpoint_url=` reaches Azurite or a private endpoint, and `anon` a public container.
    adlfs takes an endpoint only inside a connection string (`BlobEndpoint=`; its
    `account_host` is always https), and prefers AZURE_STORAGE_CONNECTION_STRING to `anon`;
    so both become a connection string of the endpoint (with `anon`: the account's own) and
    the credentials adlfs would take from the environment (that connection string's, or
    AZURE_STORAGE_ACCOUNT_NAME with AZURE_STORAGE_ACCOUNT_KEY or AZURE_STORAGE_SAS_TOKEN);
    with none of them, or `anon`, it is read anonymously."""
    client = dict(options.pop("client_kwargs", None) or {})
    endpoint = client.pop("endpoint_url", None) or options.pop("endpoint_url", None)
    anon = bool(options.get("anon"))
    name = options.get("account_name") or os.environ.get("AZURE_STORAGE_ACCOUNT_NAME")
    if endpoint is None and anon and name:
        endpoint = f"https://{name}.blob.core.windows.net"
    if endpoint is None or "connection_string" in options:
        return options
    environment: Mapping[str, str] = {} if options.pop("anon", False) else os.environ
    fields = {"DefaultEndpointsProtocol": endpoint.split("://")[0], **_azure_credentials(name, environment),
              "BlobEndpoint": endpoint}
    options.pop("account_name", None)
    options["connection_string"] = ";".join(f"{k}={v}" for k, v in fields.items() if v)
    return options


def _azure_credentials(name: str | None, environment: Mapping[str, str]) -> dict[str, str]:
    """The fields of a connection string that say who signs, from the environment (none: the
    requests are anonymous)."""
    fields = dict(_connection_fields(environment.get("AZURE_STORAGE_CONNECTION_STRING", "")))
    if {k.lower(): v.lower() for k, v in fields.items()}.get("usedevelopmentstorage") == "true":
        return dict(AZURITE_ACCOUNT)  # (the SDK would take its endpoint, port 10000, over ours)
    key, sas = environment.get("AZURE_STORAGE_ACCOUNT_KEY"), environment.get("AZURE_STORAGE_SAS_TOKEN")
    if fields or not name:
        return fields
    if key:
        return {"AccountName": name, "AccountKey": key}
    return {"AccountName": name, "SharedAccessSignature": sas.lstrip("?")} if sas else {}


def _connection_fields(text: str) -> list[tuple[str, str]]:
    """The `Name=value` fields of an Azure connection string (values may hold `=`)."""
    pairs = (field.partition("=") for field in text.split(";") if field.strip())
    return [(name.strip(), value) for name, _, value in pairs if name.strip()]


def start_writes(fs: fsspec.AbstractFileSystem, writable: bool) -> bool:
    """Whether `fs` may be written: a source written only when asked to (`start_writes`:
    Icechunk at a branch, with -o rw; ValueError elsewhere) is started writing if `writable`."""
    start = getattr(fs, "start_writes", None)
    if not callable(start):
        return True
    if writable:
        start()
    return writable


def is_read_only(fs: fsspec.AbstractFileSystem) -> bool:
    protocols = {fs.protocol} if isinstance(fs.protocol, str) else set(fs.protocol)
    return bool(protocols & READ_ONLY_PROTOCOLS)
