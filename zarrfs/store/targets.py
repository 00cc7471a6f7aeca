"""Where the bytes of a reference may come from: the places a reference set allows (its own
directory, bucket or host, and `references_allow`), and the one URL a reference resolves to
(relative paths and symlinks resolved; chained URLs, dot segments and percent-encoded
separators refused). See zarrfs.store.references.filesystem. Shared by the drivers that confine
where bytes come from: reference sets, a local store's links (`local.confined`), an Icechunk
repository's virtual chunk containers."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

import fsspec
from fsspec.utils import get_protocol

from ..declared import Option, valued

LOCAL_SCHEMES = {"file", "local"}
SCHEME_ALIASES = {"s3a": "s3", "gcs": "gs", "local": "file"}
# Percent-encoded dot, slash and backslash: servers may decode them into path segments.
_ENCODED_SEPARATOR = re.compile(r"%(2e|2f|5c)", re.IGNORECASE)


def _parse_prefixes(text: str) -> tuple[str, ...]:
    """`PREFIX:PREFIX` (colon-separated: -o splits on commas). A URL's own colon stays with
    it: `s3://other/x:/data` is `s3://other/x` and `/data`."""
    parts = re.split(r":(?!//)", text)
    if not all(parts):
        raise ValueError(text)
    return tuple(parts)


# The mount option of this rule, which each driver it confines reads itself (the reference
# sets' family lists it among its options, where the help has always shown it).
REFERENCES_ALLOW: Option[tuple[str, ...]] = valued(
    "references_allow", "list", "PREFIX:PREFIX", _parse_prefixes, (),
    "reference sets, Icechunk's virtual chunks and a local store's symbolic links: further places "
    "(colon-separated local directories or URL prefixes) that references, virtual chunk containers and links "
    "may point to; by default only below the set's own directory, bucket or host, the repository's own "
    "directory or bucket, or the store's own directory — see [What a mount trusts](#what-a-mount-trusts)")


def local_path(url: str) -> str:
    return url.split("://", 1)[1] if "://" in url else url


@dataclass(frozen=True)
class Place:
    """A local directory (scheme "file", resolved) or a URL prefix ("" path: a whole bucket
    or host): somewhere referenced bytes may come from."""

    scheme: str
    netloc: str
    path: str

    @classmethod
    def parse(cls, prefix: str) -> Place:
        """A `references_allow` prefix: a local directory or a URL prefix."""
        scheme, separator, rest = prefix.partition("://")
        if not separator or scheme.lower() in LOCAL_SCHEMES:
            return cls("file", "", os.path.realpath(rest if separator else prefix))
        netloc, _, path = rest.partition("/")
        return cls(SCHEME_ALIASES.get(scheme.lower(), scheme.lower()), netloc.lower(),
                   ("/" + path).rstrip("/"))

    def holds(self, other: Place) -> bool:
        if (self.scheme, self.netloc) != (other.scheme, other.netloc):
            return False
        prefix = self.path.rstrip("/")
        return not prefix or other.path == prefix or other.path.startswith(prefix + "/")

    def __str__(self) -> str:
        return self.path if self.scheme == "file" else f"{self.scheme}://{self.netloc}{self.path}"


@dataclass(frozen=True)
class Where:
    """Where a reference set is: its own place, and what its relative paths are relative to."""

    scheme: str  # "file" for a local set
    base: str  # a directory (local) or a URL without the trailing slash (remote)
    place: Place

    @classmethod
    def of_reference_set(cls, fs: fsspec.AbstractFileSystem, path: str) -> Where:
        """A JSON set's directory, or the directory holding a Parquet set's directory."""
        url = fs.unstrip_protocol(path).rstrip("/")
        scheme = SCHEME_ALIASES.get(get_protocol(url), get_protocol(url))
        if scheme == "file":
            directory = os.path.dirname(os.path.realpath(local_path(url)))
            return cls("file", directory, Place("file", "", directory))
        place = Place.parse(url)
        return cls(scheme, url.rsplit("/", 1)[0], Place(place.scheme, place.netloc, ""))


@dataclass(frozen=True)
class TargetPolicy:
    """Which targets references may name; `checked` gives the URL to fetch. The same rule
    confines a local store's symbolic links (`kind` "link": store.local.confined)."""

    where: Where
    allowed: tuple[Place, ...] = ()
    kind: str = "reference"  # what messages call a target's source

    def checked(self, key: str, target: Any) -> str:
        """The canonical URL of `target` (the one to fetch), or PermissionError naming `key`
        and `target` when it is not below an allowed place."""
        if not isinstance(target, str) or not target:
            raise PermissionError(f"{self.kind} {key!r} names no target file ({target!r})")
        url, place = self._resolved(key, target)
        if not any(p.holds(place) for p in (self.where.place, *self.allowed)):
            places = ", ".join(str(p) for p in (self.where.place, *self.allowed))
            resolved = "" if str(place) == target else f" ({place})"
            raise PermissionError(f"{self.kind} {key!r} points to {target!r}{resolved}, outside "
                                  f"{places} (-o references_allow=PREFIX allows more)")
        return url

    def _resolved(self, key: str, target: str) -> tuple[str, Place]:
        if "::" in target:
            raise PermissionError(f"reference {key!r}: chained URL {target!r} not allowed")
        scheme, separator, rest = target.partition("://")
        if not separator and self.where.scheme != "file" and not target.startswith("/"):
            return self._resolved(key, f"{self.where.base}/{target}")
        if not separator or scheme.lower() in LOCAL_SCHEMES:
            path = rest if separator else target
            real = os.path.realpath(os.path.join(self.where.base, path) if self.where.scheme == "file"
                                    else path)
            return "file://" + real, Place("file", "", real)
        scheme = SCHEME_ALIASES.get(scheme.lower(), scheme.lower())
        netloc, _, path = rest.partition("/")
        path = "/" + path
        segments = re.split(r"[/?#]", path)
        if ("." in segments or ".." in segments or "\\" in path or "@" in netloc or not netloc
                or _ENCODED_SEPARATOR.search(path)):
            raise PermissionError(f"reference {key!r}: ambiguous URL {target!r} not allowed")
        netloc = netloc.lower()
        return f"{scheme}://{netloc}{path}", Place(scheme, netloc, path)
