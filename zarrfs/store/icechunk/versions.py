"""An Icechunk mount's versions below `/.versions/`: `branches/NAME/`, `tags/NAME/` and
`snapshots/ID/`, each the repository at that version, read-only, beside the mounted one.

`VersionsFileSystem` wraps the mount's own filesystem: paths below `.versions/KIND/NAME/` go
to a read-only filesystem of that version (opened by `icechunk.open_filesystem`, as a mount
with `-o ref=` opens it), everything else to the wrapped one, and any attribute it does not
handle is the wrapped one's. A version is opened when first visited and kept, the last
`VERSIONS_KEPT` used; a branch's follows its branch as the mounted branch does, a tag's and a
snapshot's never change (a tag is opened at the snapshot it names, so a branch of the same
name cannot stand in for it). The names of each kind, the mounted branch's log and new tags
and branches are what `versions.Catalog` asks for.
"""

from __future__ import annotations

import asyncio
import errno
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable
from datetime import UTC
from typing import Any

import fsspec
import icechunk
from fsspec.asyn import AsyncFileSystem, sync

from ...errors import EditRefused, ReadOnlyError
from ..settings import SourceOptions
from ..values import Versioned
from ..versions import BRANCHES, KINDS, MADE_BY_MKDIR, SNAPSHOTS, TAGS, VERSIONS
from .branches import PROTOCOL, directory_entry, first_line, key_of, resolve, unless_missing
from .filesystem import DEFAULT_BRANCH, IcechunkFileSystem
from .filesystem import open_filesystem as open_version
from .options import REF

VERSIONS_KEPT = 16  # versions whose sessions stay open (the least recently used is closed)
_EXISTS = ("already exists", "update conflict")


def open_filesystem(url: str, options: dict[str, Any],
                    settings: SourceOptions) -> tuple[fsspec.AbstractFileSystem, str]:
    """The repository at `url` at `-o ref=`, with its versions below `/.versions/`."""
    mounted, root = open_version(url, options, settings)
    return VersionsFileSystem(mounted, url, options, settings), root


class VersionsFileSystem(AsyncFileSystem):  # type: ignore[misc]
    protocol = (PROTOCOL,)
    root_marker = ""
    async_impl = True
    cachable = False

    def __init__(self, mounted: IcechunkFileSystem, url: str, options: dict[str, Any],
                 settings: SourceOptions) -> None:
        self.mounted = mounted  # (first: `__getattr__` forwards to it)
        super().__init__(loop=mounted.loop)
        self.repository: icechunk.Repository = mounted.repository
        self._open_version = lambda ref: open_version(url, options,
                                                      SourceOptions(settings.given.replaced(REF, ref)))
        self._mounted_ref = settings.given[REF] or DEFAULT_BRANCH
        self._opened: OrderedDict[tuple[str, str], Any] = OrderedDict()
        self._opening: asyncio.Lock | None = None

    def __getattr__(self, name: str) -> Any:
        """What the mounted filesystem has that this one does not handle (its writes)."""
        if name == "mounted":
            raise AttributeError(name)
        return getattr(self.mounted, name)

    # -- reads -------------------------------------------------------------------------------

    async def _cat_file(self, path: str, start: int | None = None, end: int | None = None,
                        **kwargs: Any) -> bytes:
        fs, inner, _ = await self._serving(path)
        return await fs._cat_file(inner, start, end, **kwargs)  # type: ignore[no-any-return]

    async def _cat_versioned(self, path: str, start: int | None = None,
                             length: int | None = None) -> Versioned:
        fs, inner, _ = await self._serving(path)
        return await fs._cat_versioned(inner, start, length)  # type: ignore[no-any-return]

    def cat_versioned(self, path: str, start: int | None = None, length: int | None = None) -> Versioned:
        return sync(self.loop, self._cat_versioned, path, start, length)  # type: ignore[no-any-return]

    async def _info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        level = _level(path)
        if level is not None:
            return directory_entry(level)
        fs, inner, prefix = await self._serving(path)
        return _renamed(await fs._info(inner, **kwargs), prefix)

    async def _ls(self, path: str, detail: bool = True, **kwargs: Any) -> list[Any]:
        level = _level(path)
        if level is not None:
            names = KINDS if level == VERSIONS else await self._version_names(level.rpartition("/")[2])
            entries = [directory_entry(f"{level}/{name}") for name in names]
        else:
            fs, inner, prefix = await self._serving(path)
            entries = [_renamed(entry, prefix) for entry in await fs._ls(inner, detail=True, **kwargs)]
        return entries if detail else [entry["name"] for entry in entries]

    async def _find(self, path: str, maxdepth: int | None = None, withdirs: bool = False,
                    detail: bool = False, **kwargs: Any) -> Any:
        if _level(path) is not None:
            return {} if detail else []  # (what is below is every version: never listed whole)
        fs, inner, prefix = await self._serving(path)
        found = await fs._find(inner, maxdepth=maxdepth, withdirs=withdirs, detail=detail, **kwargs)
        if not detail:
            return [prefix + name for name in found]
        return {prefix + name: _renamed(info, prefix) for name, info in found.items()}

    # -- writes: the mounted version's only ----------------------------------------------

    async def _pipe_file(self, path: str, *args: Any, **kwargs: Any) -> Any:
        return await self._writing("_pipe_file", path, *args, **kwargs)

    async def _rm_file(self, path: str, *args: Any, **kwargs: Any) -> Any:
        return await self._writing("_rm_file", path, *args, **kwargs)

    async def _rm(self, path: str | list[str], *args: Any, **kwargs: Any) -> Any:
        for one in [path] if isinstance(path, str) else path:
            _refuse_below_versions(one)
        return await self.mounted._rm(path, *args, **kwargs)

    async def _cp_file(self, path1: str, path2: str, *args: Any, **kwargs: Any) -> Any:
        _refuse_below_versions(path1)
        _refuse_below_versions(path2)
        return await self.mounted._cp_file(path1, path2, *args, **kwargs)

    async def _writing(self, method: str, path: str, *args: Any, **kwargs: Any) -> Any:
        _refuse_below_versions(path)
        return await getattr(self.mounted, method)(path, *args, **kwargs)

    # -- the versions (`versions.Catalog`) ---------------------------------------------------

    async def _version_names(self, kind: str) -> list[str]:
        if kind == BRANCHES:
            found = await _guarded(self.repository.list_branches_async())
        elif kind == TAGS:
            found = await _guarded(self.repository.list_tags_async())
        elif kind == SNAPSHOTS:
            found = await self._reachable_snapshots()
        else:
            raise FileNotFoundError(kind)
        return sorted(name for name in found if _shown(name)) if kind != SNAPSHOTS else list(found)

    async def _reachable_snapshots(self) -> list[str]:
        """Every snapshot a branch or tag leads to, newest first; each ancestry walked until it
        meets one already seen (one listing of refs, then a request per snapshot)."""
        branches = await _guarded(self.repository.list_branches_async())
        tags = await _guarded(self.repository.list_tags_async())
        seen: dict[str, Any] = {}
        walks = [{"branch": name} for name in sorted(branches)] + [{"tag": name} for name in sorted(tags)]
        for start in walks:
            async for info in _commits(self.repository.async_ancestry(**start)):
                if info.id in seen:
                    break
                seen[info.id] = info.written_at
        return sorted(seen, key=lambda snapshot: seen[snapshot], reverse=True)

    async def _version_log(self) -> bytes:
        head = await self._head()
        lines = [f"{info.id} {_utc(info.written_at)} {' '.join(info.message.split())}\n"
                 async for info in _commits(self.repository.async_ancestry(snapshot_id=head))]
        return "".join(lines).encode()

    async def _create_version(self, kind: str, name: str) -> None:
        if kind not in MADE_BY_MKDIR:
            raise ReadOnlyError(f"{VERSIONS}/{kind} is read-only: only tags and branches are made")
        if not _shown(name) or name.startswith("."):
            raise EditRefused(errno.EINVAL, f"{name!r} cannot name a tag or branch")
        if name in await self._version_names(kind):
            raise EditRefused(errno.EEXIST, f"{VERSIONS}/{kind}/{name} exists")
        head = await self._head()
        make = self.repository.create_tag_async if kind == TAGS else self.repository.create_branch_async
        try:
            await make(name, head)
        except icechunk.IcechunkError as e:
            text = first_line(e)
            if any(words in text for words in _EXISTS):
                raise EditRefused(errno.EEXIST, f"{VERSIONS}/{kind}/{name} exists") from None
            if "invalid" in text:
                raise EditRefused(errno.EINVAL, f"{name!r} cannot name a tag or branch: {text}") from None
            raise OSError(text) from None

    async def _head(self) -> str:
        """The snapshot the mounted ref names now (a branch's head, looked up)."""
        try:
            return str((await _guarded(resolve(self.repository, self._mounted_ref)))[1])
        except ValueError as e:  # (the branch was deleted since it was mounted)
            raise FileNotFoundError(str(e)) from None

    def version_names(self, kind: str) -> list[str]:
        return sync(self.loop, self._version_names, kind)  # type: ignore[no-any-return]

    def version_log(self) -> bytes:
        return sync(self.loop, self._version_log)  # type: ignore[no-any-return]

    def create_version(self, kind: str, name: str) -> None:
        sync(self.loop, self._create_version, kind, name)

    # -- routing -----------------------------------------------------------------------------

    async def _serving(self, path: str) -> tuple[Any, str, str]:
        """The filesystem that serves `path`, the path there, and the prefix that makes its
        names this one's."""
        key = key_of(path)
        if key != VERSIONS and not key.startswith(VERSIONS + "/"):
            return self.mounted, path, ""
        parts = key.split("/", 3)
        if len(parts) < 3 or parts[1] not in KINDS:
            raise FileNotFoundError(key)  # (a level of .versions itself: a directory, no bytes)
        inner = "/" + (parts[3] if len(parts) > 3 else "")
        return await self._version(parts[1], parts[2]), inner, "/" + "/".join(parts[:3])

    async def _version(self, kind: str, name: str) -> Any:
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            found = self._opened.get((kind, name))
            if found is None:
                ref = await self._ref_of(kind, name)
                # (opening waits on this loop: from a thread, as a mount opens its own)
                found, _ = await asyncio.to_thread(self._open_version, ref)
                self._opened[(kind, name)] = found
                while len(self._opened) > VERSIONS_KEPT:
                    self._opened.popitem(last=False)
            self._opened.move_to_end((kind, name))
            return found

    async def _ref_of(self, kind: str, name: str) -> str:
        """The ref that opens the version `kind/name` as that kind and no other; FileNotFoundError
        when there is none."""
        try:
            if kind == BRANCHES:
                await self.repository.lookup_branch_async(name)
                return name
            if kind == TAGS:
                return str(await self.repository.lookup_tag_async(name))
            return str((await self.repository.lookup_snapshot_async(name)).id)
        except icechunk.IcechunkError as e:
            unless_missing(e)
            raise FileNotFoundError(f"{VERSIONS}/{kind}/{name}") from None


def _level(path: str) -> str | None:
    """`.versions` or `.versions/KIND` when `path` is one of them (a directory of versions)."""
    key = key_of(path)
    parts = key.split("/")
    if parts[0] != VERSIONS or len(parts) > 2 or (len(parts) == 2 and parts[1] not in KINDS):
        return None
    return key


def _refuse_below_versions(path: str) -> None:
    key = key_of(path)
    if key == VERSIONS or key.startswith(VERSIONS + "/"):
        raise ReadOnlyError(f"{key}: the versions are read-only")


def _renamed(entry: dict[str, Any], prefix: str) -> dict[str, Any]:
    return {**entry, "name": prefix + entry["name"]} if prefix else entry


def _shown(name: str) -> bool:
    """Whether a ref's name can be a file name (Icechunk allows names no directory can have)."""
    return name not in ("", ".", "..") and "/" not in name and "\0" not in name


def _utc(moment: Any) -> str:
    return str(moment.astimezone(UTC).isoformat().replace("+00:00", "Z"))


async def _commits(ancestry: AsyncIterator[Any]) -> AsyncIterator[Any]:
    try:
        async for info in ancestry:
            yield info
    except icechunk.IcechunkError as e:
        raise OSError(first_line(e)) from None


async def _guarded(awaitable: Awaitable[Any]) -> Any:
    try:
        return await awaitable
    except icechunk.IcechunkError as e:
        raise OSError(first_line(e)) from None


