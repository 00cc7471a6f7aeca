"""Reference sets (kerchunk / VirtualiZarr): a Zarr hierarchy whose chunks are byte ranges of
other files, read through fsspec's ReferenceFileSystem.

A source is a reference set when it is a file named `*.json` (or `*.json.gz`), a Parquet
reference directory (kerchunk's `refs_to_dataframe` layout: a `.zmetadata` holding
`record_size` and no `.zgroup`/`.zarray`/`zarr.json` beside it; remote ones must be named
`*.parq`/`*.parquet`, so that a normal remote store costs no extra request), or
`reference://` with `fo=`. A normal Zarr store is a directory and never matches.

A reference set is someone else's input: a reference may name any file or URL. By default
the bytes of a reference may come only from below the reference set's own directory (local
set; symlinks resolved) or from its own bucket/host (remote set); `references_allow` adds
places. The check is made on the URL actually fetched, after templates, `gen` entries and
relative paths are resolved, and the fetch uses that very URL; a refused reference fails its
own key with PermissionError, never the mount. Keys are presented with a leading "/" so that
`Store(fs, "")` and its children line up (`Store.path`, `Store.key_of`).
"""

from __future__ import annotations

import asyncio
import base64
import json
import math
import os
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import fsspec
from fsspec.asyn import sync
from fsspec.implementations.asyn_wrapper import AsyncFileSystemWrapper
from fsspec.implementations.reference import LazyReferenceMapper, ReferenceFileSystem
from fsspec.utils import get_protocol

from ..settings import SourceOptions
from ..targets import LOCAL_SCHEMES, REFERENCES_ALLOW, Place, TargetPolicy, Where, local_path
from .options import FO

T = TypeVar("T")
JSON_SUFFIXES = (".json", ".json.gz")
PARQUET_SUFFIXES = (".parq", ".parquet")
ZARR_MARKERS = (".zgroup", ".zarray", "zarr.json")
MAX_GENERATED = 10_000_000


def is_reference_source(url: str, options: dict[str, Any]) -> bool:
    """Whether `url` names a reference set (cheap: at most a stat or one `info` request)."""
    protocol = get_protocol(url)
    if protocol == "reference":
        return True
    name = url.rstrip("/")
    if name.endswith(JSON_SUFFIXES):
        return _is_file(url, protocol, options)
    if protocol in LOCAL_SCHEMES:
        return _is_parquet_directory(local_path(url))
    return name.endswith(PARQUET_SUFFIXES)


def open_filesystem(url: str, options: dict[str, Any],
                    settings: SourceOptions) -> tuple[fsspec.AbstractFileSystem, str]:
    """The reference filesystem for `url` (or for `-o fo=` with `reference://`); its
    root is "". ValueError when the file is not a reference set."""
    location = _reference_location(url, settings)
    loader, path = fsspec.core.url_to_fs(location, **options)
    where = Where.of_reference_set(loader, path)
    references = _load(loader, path, location)
    policy = TargetPolicy(where, tuple(Place.parse(p) for p in settings.given[REFERENCES_ALLOW]))
    try:
        return GuardedReferenceFileSystem(references, policy, where.scheme, options), ""
    except _malformed_errors() as e:  # fsspec expands templates and `gen` here
        raise ValueError(f"{location}: malformed reference set: {type(e).__name__}: {e}") from None


def _reference_location(url: str, settings: SourceOptions) -> str:
    if get_protocol(url) != "reference":
        return url
    location = settings.given[FO] or url.split("://", 1)[1]
    if not location:
        raise ValueError("reference:// needs the reference set: -o fo=PATH")
    return location if "://" in location else os.path.abspath(location)


def _is_file(url: str, protocol: str, options: dict[str, Any]) -> bool:
    if protocol in LOCAL_SCHEMES:
        return os.path.isfile(local_path(url))
    try:
        fs, path = fsspec.core.url_to_fs(url, **options)
        return bool(fs.info(path).get("type") == "file")
    except (OSError, ValueError):
        return False


def _is_parquet_directory(path: str) -> bool:
    if not os.path.isfile(os.path.join(path, ".zmetadata")):
        return False
    if any(os.path.exists(os.path.join(path, marker)) for marker in ZARR_MARKERS):
        return False  # a consolidated Zarr v2 store
    try:
        with open(os.path.join(path, ".zmetadata"), "rb") as f:
            return "record_size" in json.load(f)
    except (OSError, ValueError):
        return False


def _load(loader: fsspec.AbstractFileSystem, path: str,
          location: str) -> dict[str, Any] | LazyReferenceMapper:
    if loader.isdir(path):
        return LazyReferenceMapper(path, fs=loader)
    with loader.open(path, "rb", compression="infer") as f:
        try:
            references = json.load(f)
        except RecursionError:  # (json's own errors are ValueErrors)
            raise ValueError(f"{location}: JSON nested too deeply") from None
    problem = _reference_set_problem(references) or _generator_problem(references)
    if problem:
        raise ValueError(f"{location}: not a kerchunk reference set ({problem})")
    return references


def _reference_set_problem(references: Any) -> str | None:
    if not isinstance(references, dict):
        return "not a JSON object"
    if "version" in references and (references["version"] != 1
                                    or not isinstance(references.get("refs"), dict)):
        return "version 1 needs a 'refs' object; no other version exists"
    refs = references["refs"] if "version" in references else references
    if "version" not in references and not any(
            str(key).rsplit("/", 1)[-1] in ZARR_MARKERS for key in refs):
        return "no .zgroup, .zarray or zarr.json key"
    return None


def _reference_problem(key: str, part: Any) -> str | None:
    """What is wrong with one reference as fsspec keeps it (templates and `gen` expanded):
    inline data (text, or "base64:" and base64) or [url] or [url, offset, length]. fsspec
    itself would fail on a bad one only when the key is read, with a builtin error."""
    if isinstance(part, str | bytes):
        encoded = part.encode() if isinstance(part, str) else part
        if encoded.startswith(b"base64:"):
            try:
                base64.b64decode(encoded[7:])
            except ValueError:  # (binascii.Error)
                return f"reference {key!r}: not valid base64"
        return None
    if isinstance(part, list) and len(part) == 1:
        return None
    if not (isinstance(part, list) and len(part) == 3):
        return f"reference {key!r} is neither data nor [url] nor [url, offset, length]"
    offset, length = part[1], part[2]
    if not all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n < 1 << 62 for n in (offset, length)):
        return f"reference {key!r}: offset and length must be integers from 0 to 2**62, got {part[1:]!r}"
    return None


def _malformed_errors() -> tuple[type[Exception], ...]:
    errors: tuple[type[Exception], ...] = (KeyError, TypeError, ValueError, AttributeError,
                                           IndexError, OverflowError)
    try:
        from jinja2 import TemplateError
    except ImportError:
        return errors
    return (*errors, TemplateError)


def _generator_problem(references: dict[str, Any]) -> str | None:
    """`gen` entries are expanded when the set is opened: a few numbers in someone else's
    file must not make billions of references."""
    try:
        total = sum(math.prod(len(range(d.get("start", 0), d["stop"], d.get("step", 1)))
                              if isinstance(d, dict) else len(d)
                              for d in entry["dimensions"].values())
                    for entry in references.get("gen") or [])
    except _malformed_errors() as e:
        return f"malformed 'gen': {type(e).__name__}: {e}"
    return f"'gen' makes {total} references, more than {MAX_GENERATED}" if total > MAX_GENERATED else None


# -- the filesystem ----------------------------------------------------------------------


class BrokenReference(PermissionError):
    """A referenced file that is not there. A PermissionError so that it is not retried: the
    reference set is wrong, and waiting will not mend it."""


class TargetFilesystems(dict[str, fsspec.AbstractFileSystem]):
    """The filesystem of each target scheme, made when first needed. The mount's storage
    options go to targets of the source's own scheme, and to S3 targets of a local set."""

    def __init__(self, source_scheme: str, options: Mapping[str, Any]) -> None:
        super().__init__()
        self.source_scheme = source_scheme
        self.options = dict(options)

    def __missing__(self, scheme: str) -> fsspec.AbstractFileSystem:
        takes_options = scheme == self.source_scheme or (self.source_scheme == "file" and scheme == "s3")
        options = self.options if takes_options and scheme != "file" else {}
        fs = fsspec.filesystem(scheme or "file", **options)
        if not fs.async_impl:
            fs = AsyncFileSystemWrapper(fs, asynchronous=False)
        self[scheme] = fs
        return fs


class GuardedReferenceFileSystem(ReferenceFileSystem):  # type: ignore[misc]
    """fsspec's ReferenceFileSystem, every target checked by a `TargetPolicy` before it is
    fetched, inline data sized as decoded, and keys named with a leading "/"."""

    protocol = "reference"

    def __init__(self, references: dict[str, Any] | LazyReferenceMapper, policy: TargetPolicy,
                 source_scheme: str, options: Mapping[str, Any]) -> None:
        generated = isinstance(references, dict) and bool(references.get("gen"))
        # fs={}: fsspec would otherwise make filesystems for the protocols it finds; ours are
        # made (and fed the checked URLs) by TargetFilesystems.
        super().__init__(references, fs={}, simple_templates=not generated)
        self.fss = TargetFilesystems(source_scheme, options)
        self.policy = policy
        self.lazy = isinstance(self.references, LazyReferenceMapper)
        if not self.lazy:  # (a Parquet set's references are read as they are needed)
            for key, part in self.references.items():
                problem = _reference_problem(key, part)
                if problem:
                    raise ValueError(problem)

    @classmethod
    def _strip_protocol(cls, path: str) -> str:
        stripped: str = super()._strip_protocol(path)
        return stripped.strip("/")

    def _cat_common(self, path: str, start: int | None = None,
                    end: int | None = None) -> tuple[Any, int | None, int | None]:
        # Every read of fsspec's (cat, open, ReferenceFile) resolves its target here.
        target, first, last = super()._cat_common(path, start, end)
        if isinstance(target, bytes):
            return target, first, last
        key = self._strip_protocol(path)
        return self.policy.checked(key, str(target)), first, last

    async def _off_loop(self, function: Callable[..., T], *args: Any) -> T:
        """Parquet references are read with blocking calls (pandas, a synchronous fsspec
        filesystem): not on the event loop."""
        if self.lazy:
            return await asyncio.to_thread(function, *args)
        return function(*args)

    async def _cat_file(self, path: str, start: int | None = None, end: int | None = None,
                        **kwargs: Any) -> bytes:
        target, first, last = await self._off_loop(self._cat_common, path, start, end)
        if isinstance(target, bytes):
            return target[start:end]
        try:
            data: bytes = await self.fss[fsspec.core.split_protocol(target)[0]]._cat_file(
                target, start=first, end=last)
        except FileNotFoundError:
            raise BrokenReference(f"reference {self._strip_protocol(path)!r}: {target} "
                                  "does not exist") from None
        return data

    async def _info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        key = self._strip_protocol(path)
        part = await self._off_loop(self.references.get, key) if key else None
        if part is None:
            await self._ls(key)  # FileNotFoundError when it is not a directory either
            return {"name": "/" + key, "type": "directory", "size": 0}
        size = _inline_or_ranged_size(part)
        if size is None:
            target, _, _ = await self._off_loop(self._cat_common, key)
            size = len(target) if isinstance(target, bytes) else await self.fss[
                fsspec.core.split_protocol(target)[0]]._size(target)
        return {"name": "/" + key, "type": "file", "size": size}

    async def _ls(self, path: str, detail: bool = True, **kwargs: Any) -> list[Any]:
        key = self._strip_protocol(path)
        entries = await self._off_loop(ReferenceFileSystem.ls, self, key, True)
        named = [{**entry, "name": "/" + entry["name"].strip("/")} for entry in entries]
        return named if detail else [entry["name"] for entry in named]

    async def _find(self, path: str, maxdepth: int | None = None, withdirs: bool = False,
                    **kwargs: Any) -> Any:
        prefix = self._strip_protocol(path)
        prefix = prefix + "/" if prefix else ""
        keys = await self._off_loop(lambda: sorted(k for k in self.references if k.startswith(prefix)))
        if not kwargs.get("detail"):
            return ["/" + key for key in keys]
        parts = await self._off_loop(lambda: [self.references.get(k) for k in keys])
        return {"/" + key: {"name": "/" + key, "type": "file", "size": _inline_or_ranged_size(part)}
                for key, part in zip(keys, parts, strict=True)}

    # Synchronous callers (`zarrfs check`, fsspec helpers) get the checked coroutines above,
    # not fsspec's own synchronous versions, which would fetch and size unchecked targets.
    def info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        return sync(self.loop, self._info, path)  # type: ignore[no-any-return]

    def ls(self, path: str, detail: bool = True, **kwargs: Any) -> list[Any]:
        return sync(self.loop, self._ls, path, detail)  # type: ignore[no-any-return]

    def find(self, path: str, maxdepth: int | None = None, withdirs: bool = False,
             detail: bool = False, **kwargs: Any) -> Any:
        return sync(self.loop, self._find, path, detail=detail)

    def cat(self, path: Any, recursive: bool = False, on_error: str = "raise", **kwargs: Any) -> Any:
        return sync(self.loop, self._cat, path, recursive=recursive, on_error=on_error)

    def cat_file(self, path: str, start: int | None = None, end: int | None = None,
                 **kwargs: Any) -> bytes:
        return sync(self.loop, self._cat_file, path, start, end)  # type: ignore[no-any-return]


def _inline_or_ranged_size(part: Any) -> int | None:
    """The size a reference gives without fetching anything (None: a whole file's)."""
    if hasattr(part, "to_bytes"):
        part = part.to_bytes()
    if isinstance(part, str):
        part = part.encode()
    if isinstance(part, bytes):
        if part.startswith(b"base64:"):
            return len(base64.b64decode(part[7:]))
        return len(part)
    if isinstance(part, list | tuple) and len(part) == 3:
        return int(part[2])
    return None
