"""Which virtual chunk containers an Icechunk mount reads from, and how it reaches them.

A repository written by VirtualiZarr holds chunks that are byte ranges of other files (NetCDF,
HDF5, GRIB on a disk or S3). Its config declares the containers they lie in: a URL prefix and
the object store settings that reach it (endpoint, options). Icechunk reads a container's
chunks only when the opener authorizes it. Both the declaration and the references are
written by whoever wrote the repository, so a mount trusts them as it trusts a reference set
(`store.targets.TargetPolicy`, the same rule): a container is authorized when its prefix lies
below the repository's own directory (symlinks resolved) or bucket, or below a prefix of
`-o references_allow=`. An authorized container is reached with the mount's settings, never
the declared ones: a repository must not send the mounter's signed requests, or its reads,
to a server of its choosing (an endpoint at an instance metadata address, a proxy), and its
credentials come from where the mount takes its own (the environment, `-o anon`).

Reads of a container not authorized, or of a chunk no container holds, are refused by
Icechunk; `refusal` turns its message into one that says why and names the option.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

import icechunk

from ..targets import Place, TargetPolicy, Where

# The containers a mount reaches, as Icechunk reads their URLs: a local path (never
# `file://HOST/PATH`, which Icechunk reads as /PATH while the rule would see HOST/PATH below
# the repository), an S3 bucket's prefix, or an HTTP(S) server's. Others (GCS, Azure,
# Tigris: their credentials not yet taken as the mount takes its own) are refused, named so,
# and so are prefixes Icechunk may read otherwise than the rule: a query, a fragment,
# percent-encoding, a backslash.
PLAIN_PREFIXES = ("file:///", "s3://", "https://", "http://")
_AMBIGUOUS = re.compile(r"[?#%\\]")
_UNAUTHORIZED = re.compile(r"resolves to the url prefix (\S+?),? to be able to fetch")
# Virtual chunks that no retry can read: not in a container, or whose reference is broken (a
# location that is no plain path; its file gone, not the daemon's user's to read, or changed
# since the reference was written), each with what the log says of it.
_NEVER_READ = (
    (re.compile(r"no virtual chunk container can handle the chunk location \((.*?)\)"),
     "it points to {0!r}, in none of the containers the repository declares"),
    (re.compile(r'Error parsing Path "(.*?)"'), "its location {0!r} is not a plain path"),
    (re.compile(r"error fetching virtual reference.*Object at location (\S+) not found"),
     "its file {0} is not there"),
    (re.compile(r"error fetching virtual reference.*Unable to open file (\S+): Permission denied"),
     "its file {0} may not be read by the daemon's user"),
    (re.compile(r"error fetching virtual reference.*\b(NoSuchKey|NoSuchBucket|AccessDenied)\b"),
     "its object is not there, or not for the mount's credentials ({0})"),
    (re.compile(r"(the checksum of the object owning the virtual chunk has changed)"), "{0}"),
    (re.compile(r"(error retrieving virtual chunk, not enough data)"), "{0}"),
    (re.compile(r"error parsing virtual ref URL: (.*?) "), "its location {0} is no URL"),
)
_REGION = re.compile(r"[a-z]{2}(-[a-z0-9]+)+")
_FRAME = re.compile(r"^\s*(x |\|->|`->|\|)")


@dataclass(frozen=True)
class Reach:
    """How the mount reaches S3: its own endpoint, region and anonymity."""

    endpoint_url: str | None
    region: str
    anonymous: bool

    def s3_store(self, declared_region: str | None) -> Any:
        """An S3 store config of the mount's settings (the declared region kept: it only
        picks among AWS's own endpoints, and a bucket answers only in its region)."""
        endpoint = self.endpoint_url
        return icechunk.s3_store(
            region=declared_region or self.region, endpoint_url=endpoint,
            allow_http=bool(endpoint and endpoint.startswith("http://")), anonymous=self.anonymous,
            s3_compatible=endpoint is not None, force_path_style=endpoint is not None)

    def s3_credentials(self) -> Any:
        return icechunk.s3_anonymous_credentials() if self.anonymous else icechunk.s3_from_env_credentials()


def repository_policy(location: str, allowed: tuple[str, ...]) -> TargetPolicy:
    """The rule for a repository at `location` (a local directory, or `s3://BUCKET/PREFIX`):
    its own directory or bucket, and `references_allow`."""
    if location.startswith("s3://"):
        bucket = location[len("s3://"):].partition("/")[0].lower()
        where = Where("s3", location.rstrip("/"), Place("s3", bucket, ""))
    else:
        directory = os.path.realpath(location)
        where = Where("file", directory, Place("file", "", directory))
    return TargetPolicy(where, tuple(Place.parse(prefix) for prefix in allowed))


@dataclass(frozen=True)
class Containers:
    """The repository's declared containers as the mount takes them: each one either rebuilt
    with the mount's settings and authorized, or refused with the reason."""

    config: Any = None  # an icechunk.RepositoryConfig holding every declared container
    credentials: dict[str, Any] = field(default_factory=dict)  # authorized prefix -> credentials
    refused: dict[str, str] = field(default_factory=dict)  # refused prefix -> why

    @classmethod
    def sorted_out(cls, declared: dict[str, Any], policy: TargetPolicy, reach: Reach) -> Containers:
        config = icechunk.RepositoryConfig()
        credentials: dict[str, Any] = {}
        refused: dict[str, str] = {}
        for declared_prefix, container in declared.items():
            prefix = declared_prefix if declared_prefix.endswith("/") else declared_prefix + "/"
            try:
                rebuilt, credential = _rebuilt(prefix, container, policy, reach)
            except PermissionError as e:
                refused[prefix] = str(e)
                config.set_virtual_chunk_container(container)  # (declared: never fetched)
                continue
            config.set_virtual_chunk_container(rebuilt)
            credentials[prefix] = credential
        return cls(config, credentials, refused)

    def refusal(self, message: str) -> str | None:
        """Why a read that Icechunk failed with `message` cannot succeed by trying again (a
        container not authorized, no container, a broken reference); None for any other
        failure."""
        message = _unwrapped(message)
        unauthorized = _UNAUTHORIZED.search(message)
        if unauthorized:
            prefix = unauthorized.group(1)
            return "virtual chunk not read: " + self.refused.get(
                prefix, f"its container {prefix!r} is not authorized")
        for pattern, what in _NEVER_READ:
            found = pattern.search(message)
            if found:
                return "virtual chunk not read: " + what.format(found.group(1))
        return None


def _unwrapped(message: str) -> str:
    """Icechunk's report on one line: its frame (`x`, `|`, `->`) and line breaks taken out,
    which may fall inside the sentence a refusal is recognised by."""
    lines = (_FRAME.sub("", line).strip() for line in message.splitlines())
    return " ".join(line for line in lines if line)


def _rebuilt(prefix: str, container: Any, policy: TargetPolicy, reach: Reach) -> tuple[Any, Any]:
    """The container at `prefix` with the mount's settings, and its credentials;
    PermissionError (the reason) when the mount may not read from it."""
    if not prefix.startswith(PLAIN_PREFIXES) or _AMBIGUOUS.search(prefix):
        raise PermissionError(f"virtual chunk container {prefix!r}: zarrfs reads virtual chunks "
                              f"from file:///, s3:// and http(s):// containers of plain paths only")
    store, credential = _reached(policy.checked("virtual chunk container", prefix), container, reach)
    try:
        return icechunk.VirtualChunkContainer(prefix, store), credential
    except (ValueError, icechunk.IcechunkError) as e:  # (a prefix Icechunk itself refuses)
        raise PermissionError(f"virtual chunk container {prefix!r}: {e}") from None


def _reached(url: str, container: Any, reach: Reach) -> tuple[Any, Any]:
    """The store config and credentials that reach the container at `url` (checked)."""
    if url.startswith("file://"):
        return icechunk.local_filesystem_store(url[len("file://"):]), None
    if url.startswith("s3://"):
        return reach.s3_store(_declared_region(container)), reach.s3_credentials()
    # HTTP(S): none of the declared options (a proxy, certificates not checked), no credentials.
    return icechunk.http_store({"allow_http": "true"} if url.startswith("http:") else {}), None


def _declared_region(container: Any) -> str | None:
    """The region an S3 container declares, when it is one (a name like `eu-west-1`: never
    anything that could make AWS's endpoint name some other host)."""
    try:
        region = container.store[0].region
    except (AttributeError, IndexError, KeyError, TypeError):  # (not an S3 store's options)
        return None
    return region if isinstance(region, str) and _REGION.fullmatch(region) else None


async def authorized(repository: icechunk.Repository, policy: TargetPolicy,
                     reach: Reach) -> tuple[icechunk.Repository, Containers]:
    """`repository` reopened with the containers the mount may read from authorized."""
    declared = dict(repository.config.virtual_chunk_containers or {})
    if not declared:
        return repository, Containers()
    containers = Containers.sorted_out(declared, policy, reach)
    reopened = await repository.reopen_async(
        config=containers.config,
        authorize_virtual_chunk_access=icechunk.containers_credentials(containers.credentials))
    return reopened, containers
