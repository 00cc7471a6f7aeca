"""Zipped Zarr, read-only: a Zarr store (an array or a hierarchy) inside a zip archive, local
or remote, read in place.

A source is a zip when it is a local file named `*.zip` or `*.ozx`, a URL named so
(`s3://bucket/cells.ome.zarr.zip`, `gs://`, `https://`: by its name, at no request), or
fsspec's chained form `zip::URL` (`zip://FOLDER::URL` names the folder of the zip holding
the store). The layouts met in practice:

- zarr-python's `ZipStore`: the store at the zip's root (`zarr.json` or `.zgroup`/`.zarray`);
- the BioImage Archive's `NAME.ome.zarr.zip`: the store in one folder of the zip;
- OME-NGFF's RFC-9 `.ozx`: OME-Zarr 0.5 at the root, entries stored, ZIP64, a comment.

The Zarr root is the folder nearest the top holding Zarr metadata, when there is one such
folder (or the one `zip://FOLDER::` names). A zip is an adapter (`driver.Adapter`): the
archive itself is read through a store of its directory, of any driver (`core.Store.open`
opens it), so each read of it has that store's deadline and retries and the request log
counts it; `zip_index` reads the central directory once and each entry with one
ranged read (remotely, together with the entries after it: `zip_spans`). Listings and
sizes come from the central directory, at no request.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, ClassVar

from fsspec import AbstractFileSystem
from fsspec.utils import get_protocol

from ...errors import StoreError
from ..driver import Container
from ..ranges import ByteRange
from .driver import ZipDriver
from .index import ZipIndex

SUFFIXES = (".zip", ".ozx")
ZARR_MARKERS = ("zarr.json", ".zgroup", ".zarray")
_CHAINED = "::"
_LOCAL_PROTOCOLS = ("file", "local")


@dataclass(frozen=True)
class ZipSource:
    """Where a zip is (`directory` and `name`: a store of the directory, the archive's key in
    it) and which folder inside it was asked for (None: found by its Zarr metadata). The
    adapter of a zip source (`driver.Adapter`)."""

    directory: str
    name: str
    inside: str | None = None
    kind: ClassVar[str] = "zip"

    @property
    def below(self) -> str:
        return self.directory

    def over(self, container: Container) -> tuple[ZipDriver, str]:
        fs, root = open_zip(self, container)
        return ZipDriver(fs), root

    @classmethod
    def parse(cls, url: str) -> ZipSource | None:
        """The zip `url` names (None: not a zip source; a local path must be a file)."""
        inside: str | None = None
        first, chained, rest = url.partition(_CHAINED)
        if chained and first.partition("://")[0] == "zip":
            inside = first.partition("://")[2].strip("/") or None
            url = rest
        elif not _named_zip(url):
            return None
        if get_protocol(url) in _LOCAL_PROTOCOLS:
            # (resolved once, as a directory store's root: the archive the mount names)
            path = os.path.realpath(url.partition("://")[2] if "://" in url else url)
            if not os.path.isfile(path):
                return None
            directory, name = os.path.split(path)
            return cls(directory, name, inside)
        directory, _, name = url.rstrip("/").rpartition("/")
        return cls(directory, name, inside)


def open_zip(source: ZipSource, container: Container) -> tuple[ZippedFileSystem, str]:
    """The filesystem of the archive `source` names, read through `container`, and the root
    path of the Zarr store in it. StoreError when there is no such archive, it is not a zip,
    or the folder asked for is not in it."""
    size = container.size(source.name)
    if size is None:
        raise StoreError(source.name, "no such zip archive")

    def read_range(start: int, length: int) -> bytes:
        return container.get(source.name, ByteRange(start, length)) or b""

    # (a remote archive's entries are read with their neighbours: a request costs a round trip)
    index = ZipIndex.open(source.name, size, read_range, with_neighbours=container.capabilities.round_trips)
    fs = ZippedFileSystem(index)
    try:
        return fs, fs.zarr_root(source.inside)
    except FileNotFoundError as e:
        raise StoreError(source.name, str(e)) from None


def _named_zip(url: str) -> bool:
    return url.rstrip("/").lower().endswith(SUFFIXES)


class ZippedFileSystem(AbstractFileSystem):  # type: ignore[misc]
    """The entries of one zip archive as a read-only filesystem: paths are "/" and an
    entry's name (`/folder/zarr.json`), so `Store(fs, "")` and its children line up, as for
    reference sets. Directories are those the names imply."""

    protocol: ClassVar[str] = "zarrfs-zip"
    cachable = False  # (one instance per archive opened: never shared through fsspec's cache)

    def __init__(self, index: ZipIndex) -> None:
        super().__init__()
        self.index = index
        self.directories = _directories(index.entries)

    def zarr_root(self, inside: str | None) -> str:
        """The root path of the Zarr store: the folder `inside` names, or the one found."""
        if inside is None:
            return _path(_zarr_folder(self.index.entries, self.directories))
        if inside not in self.directories:
            raise FileNotFoundError(f"{self.index.name}: no folder {inside!r} in the zip")
        return _path(inside)

    def cat_file(self, path: str, start: int | None = None, end: int | None = None,
                 **kwargs: Any) -> bytes:
        key = _key(path)
        entry = self.index.entries.get(key)
        if entry is None:
            raise FileNotFoundError(path)
        first = 0 if start is None else (start if start >= 0 else max(0, entry.size + start))
        last = None if end is None else (end if end >= 0 else max(0, entry.size + end))
        return self.index.read(key, first, last)

    def info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        key = _key(path)
        entry = self.index.entries.get(key)
        if entry is not None:
            # (the archive does not change while it is mounted: where the entry is names it)
            return {"name": _path(key), "type": "file", "size": entry.size,
                    "generation": f"{entry.header_offset:x}-{entry.crc:08x}"}
        if key in self.directories:
            return {"name": _path(key), "type": "directory", "size": 0}
        raise FileNotFoundError(path)

    def ls(self, path: str, detail: bool = True, **kwargs: Any) -> list[Any]:
        key = _key(path)
        if key not in self.directories:
            found = self.info(path)  # (FileNotFoundError, or a file: listed as itself)
            return [found if detail else found["name"]]
        names = self.directories[key]
        prefix = f"{key}/" if key else ""
        described = [self.info(prefix + name) for name in sorted(names)]
        return described if detail else [d["name"] for d in described]

    def find(self, path: str, maxdepth: int | None = None, withdirs: bool = False,
             detail: bool = False, **kwargs: Any) -> Any:
        key = _key(path)
        prefix = f"{key}/" if key else ""
        found = sorted(name for name in self.index.entries if name.startswith(prefix))
        if key in self.index.entries:
            found = [key]
        if not detail:
            return [_path(name) for name in found]
        return {_path(name): self.info(name) for name in found}


def _key(path: str) -> str:
    return path.strip("/")


def _path(key: str) -> str:
    return "/" + key if key else ""


def _directories(entries: dict[str, Any]) -> dict[str, set[str]]:
    """Each directory the names imply ("": the top) and the names directly in it."""
    directories: dict[str, set[str]] = {"": set()}
    for name in entries:
        parts = name.split("/")
        for depth in range(len(parts)):
            parent = "/".join(parts[:depth])
            directories.setdefault(parent, set()).add(parts[depth])
    return directories


def _zarr_folder(entries: dict[str, Any], directories: dict[str, set[str]]) -> str:
    """The folder nearest the top holding Zarr metadata ("": the top, or no single one)."""
    holding = [folder for folder in directories
               if any((f"{folder}/{marker}" if folder else marker) in entries for marker in ZARR_MARKERS)]
    if not holding:
        return ""
    depth = min(_depth(folder) for folder in holding)
    nearest = [folder for folder in holding if _depth(folder) == depth]
    return nearest[0] if len(nearest) == 1 else ""


def _depth(folder: str) -> int:
    return folder.count("/") + 1 if folder else 0
