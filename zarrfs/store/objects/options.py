"""The mount options of the object stores (`endpoint_url=`, `anon`, `profile=`, `region=`,
`account_name=`), which become fsspec's storage options (`storage_options`), and what gcsfs and
adlfs need of them: the object stores' own ways of reaching an emulator or a private endpoint."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ...declared import Option, OptionValues, valued

ENDPOINT_URL = valued(
    "endpoint_url", "text", "URL", str, None,
    "S3 endpoint, for MinIO, Ceph and other S3-compatible stores (also a GCS or Azure endpoint: an emulator)")
ANON = Option(
    "anon", "flag", False, "access S3, GCS or Azure without credentials (public buckets and containers)",
    parse=lambda text: text.lower() in ("1", "true", "yes"), words={"anon": True}, shown=("anon",))
PROFILE = valued("profile", "text", "NAME", str, None,
                 "S3 credentials from this profile in `~/.aws/credentials`")
REGION = valued("region", "text", "NAME", str, None, "S3 region")
ACCOUNT_NAME = valued(
    "account_name", "text", "NAME", str, None,
    "Azure storage account (`az://`, `abfs://`); its key, SAS token or connection string come from the "
    "environment (see [remote.md](remote.md#azure-blob-storage))")
OPTIONS: tuple[Option[Any], ...] = (ENDPOINT_URL, ANON, PROFILE, REGION, ACCOUNT_NAME)


def storage_options(values: OptionValues) -> dict[str, Any]:
    """fsspec's storage options, of those given (`endpoint_url=` among the client's arguments,
    as s3fs takes it)."""
    options: dict[str, Any] = {option.name: values[option] for option in OPTIONS if option in values}
    if "endpoint_url" in options:
        options["client_kwargs"] = {"endpoint_url": options.pop("endpoint_url")}
    return options

# Azurite's development account, as `UseDevelopmentStorage=true` names it (published, the
# same in every Azurite: not a secret).
AZURITE_ACCOUNT = {
    "AccountName": "devstoreaccount1",
    "AccountKey": "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==",
}

def gcs_options(options: dict[str, Any]) -> dict[str, Any]:
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


def azure_options(options: dict[str, Any]) -> dict[str, Any]:
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
