"""Icechunk repositories (`icechunk://`), read-only, as an asynchronous fsspec filesystem.

`icechunk:///srv/repo` is a repository in a local directory, `icechunk://s3://bucket/prefix`
one on S3 (or an S3-compatible server: `endpoint_url=`; credentials from the environment).
`-o ref=` picks what is mounted: a branch (default `main`), a tag or a snapshot id.

Keys are read through an Icechunk session's zarr store, on the filesystem's own event loop
(so a deadline can cancel them). Every key has a generation, the snapshot it last changed in:
a tag or a snapshot never changes, so its keys keep the generation they were mounted with. A
branch is followed: when asked about a key's size or generation (`_info`, `_find`: what a
recheck asks), the filesystem looks the branch's head up again, at most once a second, and
when it moved opens a session at the new head and diffs the two snapshots, so only the keys
that commit changed get a new generation (and only their cached chunks are dropped). Reads in
between show the snapshot last looked up, whole: never half of a commit.

Paths are the repository's keys below `/` (`/temperature/c/0/1`); the root path is "".
Mounted at a branch with `-o rw` (`start_writes`), the filesystem writes through a writable
session and commits where other stores would make writes durable (`commits_on_sync`: the
Store's syncs are commits; zarrfs.store.icechunk.writes). Virtual chunks are read from the
containers the mount authorizes (zarrfs.store.icechunk.containers); a read Icechunk refuses
for good is a PermissionError (`VirtualChunkRefused`), which the Store does not retry.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
from collections.abc import Sequence
from typing import Any

import fsspec
import icechunk
from fsspec.asyn import AsyncFileSystem, sync
from zarr.abc.store import ByteRequest, OffsetByteRequest, RangeByteRequest
from zarr.core.buffer import default_buffer_prototype

from ...errors import ConflictError
from ..settings import SourceOptions
from ..targets import REFERENCES_ALLOW, TargetPolicy
from ..values import Versioned
from . import containers
from .branches import (
    HEAD_LOOKUP_SECONDS,
    PROTOCOL,
    BranchState,
    directory_entry,
    first_line,
    join,
    key_of,
    open_repository,
    path_of,
)
from .options import COMMIT, REF
from .writes import BranchWriter

DEFAULT_BRANCH = "main"
RESUME_SECONDS = 5.0  # the longest a mount waits for the diff that lets it use older entries
log = logging.getLogger(__name__)
# Icechunk's errors for a key that cannot exist (a v2 name, a path outside the zarr layout).
_NOT_A_KEY = ("invalid zarr key", "key not found", "bad key prefix")

if "ICECHUNK_LOG" not in os.environ:
    # (a warning that local repositories are unsafe for concurrent commits, at every session:
    # docs/remote.md says it once)
    icechunk.set_logs_filter("error")


def open_filesystem(url: str, options: dict[str, Any],
                    settings: SourceOptions) -> tuple[fsspec.AbstractFileSystem, str]:
    """The filesystem of the repository at `url`, at `-o ref=`, its virtual chunk
    containers authorized as `containers` says. ValueError (one line) when there is no
    repository there or no such ref; OSError when it cannot be reached."""
    location = _location(url)
    policy = containers.repository_policy(location, settings.given[REFERENCES_ALLOW])
    loop = fsspec.asyn.get_loop()
    try:
        state, authorized = sync(loop, _open, _storage(location, options), policy, _reach(options),
                                 settings.given[REF] or DEFAULT_BRANCH)
    except icechunk.IcechunkError as e:
        raise OSError(first_line(e)) from None
    return IcechunkFileSystem(state, settings, authorized, loop=loop), ""


async def _open(storage: icechunk.Storage, policy: TargetPolicy, reach: containers.Reach,
                ref: str) -> tuple[BranchState, containers.Containers]:
    repository, authorized = await containers.authorized(await open_repository(storage), policy, reach)
    return await BranchState.open(repository, ref), authorized


def _location(url: str) -> str:
    """A local repository's absolute path, or `s3://BUCKET/PREFIX`."""
    location = url[len(PROTOCOL) + 3:] if url.startswith(PROTOCOL + "://") else url
    if location.startswith("file://"):
        location = location[len("file://"):]
    if not location.startswith(("/", "s3://")):
        raise ValueError(f"an Icechunk repository is icechunk:///ABSOLUTE/PATH or "
                         f"icechunk://s3://BUCKET/PREFIX, not {url!r}")
    return location


def _storage(location: str, options: dict[str, Any]) -> icechunk.Storage:
    if location.startswith("s3://"):
        return _s3_storage(location[len("s3://"):], options)
    if not os.path.isdir(location):
        raise ValueError(f"no Icechunk repository at {location}: no such directory")
    return icechunk.local_filesystem_storage(location)


def _reach(options: dict[str, Any]) -> containers.Reach:
    """The mount's S3 settings: its endpoint and region (`endpoint_url=`, `region=` or the
    environment's) and `anon`."""
    client = options.get("client_kwargs") or {}
    region = client.get("region_name") or os.environ.get(
        "AWS_REGION", os.environ.get("AWS_DEFAULT_REGION", "us-east-1"))
    return containers.Reach(client.get("endpoint_url") or options.get("endpoint_url"), region,
                            bool(options.get("anon", False)))


def _s3_storage(bucket_and_prefix: str, options: dict[str, Any]) -> icechunk.Storage:
    bucket, _, prefix = bucket_and_prefix.partition("/")
    reach = _reach(options)
    endpoint = reach.endpoint_url
    return icechunk.s3_storage(
        bucket=bucket, prefix=prefix.strip("/") or None, region=reach.region, endpoint_url=endpoint,
        allow_http=bool(endpoint and endpoint.startswith("http://")),
        force_path_style=endpoint is not None, anonymous=reach.anonymous or None,
        from_env=None if reach.anonymous else True)


class IcechunkFileSystem(AsyncFileSystem):  # type: ignore[misc]
    """An fsspec view of an Icechunk repository at a branch, tag or snapshot; writable at a
    branch once `start_writes` is called."""

    protocol = (PROTOCOL,)
    root_marker = ""
    async_impl = True
    cachable = False
    # zarrfs's Store asks reads for their generation (`cat_versioned`), as it does of S3.
    reads_report_generations = True

    def __init__(self, state: BranchState, settings: SourceOptions,
                 authorized: containers.Containers, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._state = state
        self._settings = settings
        self._containers = authorized
        self._moving: asyncio.Lock | None = None
        self._writer: BranchWriter | None = None

    @property
    def commits_on_sync(self) -> bool:
        """Whether writes go into a session committed at the Store's syncs (`_commit`)."""
        return self._writer is not None

    def start_writes(self) -> None:
        """Write from now on (ValueError, one line, when not mounted at a branch)."""
        if self._state.branch is None:
            raise ValueError(f"-o rw needs a branch: {self._settings.given[REF]!r} is a tag or a snapshot")
        seconds = self._settings.remote_timeout
        self._writer = sync(self.loop, _guarded, BranchWriter.open(
            self._state, self._settings.given[COMMIT], seconds), timeout=seconds)
        atexit.register(self._commit_at_exit)

    def _commit_at_exit(self) -> None:
        """What was written and not yet committed (no sync asked for it) at unmount."""
        if self._writer is not None and self._writer.pending:
            sync(self.loop, _guarded, self._writer.commit_everything(), timeout=self._writer.timeout)

    @property
    def repository(self) -> icechunk.Repository:
        """The repository served (its refs and history: `icechunk_versions`)."""
        return self._state.repository

    async def _current(self, follow: bool) -> BranchState:
        """The state to answer from; `follow`: the branch's head looked up first (rechecks)."""
        if self._writer is not None:
            return await _guarded(self._writer.follow(HEAD_LOOKUP_SECONDS)) if follow else self._writer.state
        if not follow or self._state.branch is None:
            return self._state
        if self._moving is None:
            self._moving = asyncio.Lock()
        async with self._moving:
            self._state = await _guarded(self._state.at_head())
        return self._state

    async def _cat_file(self, path: str, start: int | None = None, end: int | None = None,
                        **kwargs: Any) -> bytes:
        state = await self._current(follow=False)
        return await self._read(state, key_of(path), start, end)

    async def _cat_versioned(self, path: str, start: int | None = None,
                             length: int | None = None) -> Versioned:
        """The bytes of `path` (`length` of them from `start`) and their generation, from one
        snapshot."""
        state = await self._current(follow=False)
        key = key_of(path)
        end = None if start is None or length is None else start + length
        return Versioned(await self._read(state, key, start, end), self._generation(state, key))

    def cat_versioned(self, path: str, start: int | None = None, length: int | None = None) -> Versioned:
        return sync(self.loop, self._cat_versioned, path, start, length)  # type: ignore[no-any-return]

    def resume(self, generations: Sequence[str]) -> None:
        """Start from `generations` (snapshots an earlier mount's entries in the disk cache
        were read at, the last used first) where the commits since left keys as they were
        (`BranchState.resumed`: one diff). Not while writing: the writer holds its state."""
        if self._writer is not None or not generations:
            return
        try:
            self._state = sync(self.loop, _guarded, self._state.resumed(generations),
                               timeout=min(self._settings.remote_timeout, RESUME_SECONDS))
        except OSError as e:  # (a fault, or past its time: each key then reads afresh)
            log.info("icechunk: the disk cache's earlier snapshots were not diffed: %s", first_line(e))

    def known_generation(self, path: str) -> str:
        """The generation of `path` as the mount last followed its ref, without a request:
        an entry of the disk cache (`disk_cache_reads`) of that generation is never checked."""
        return self._state.generations.of(key_of(path))

    async def _read(self, state: BranchState, key: str, start: int | None, end: int | None) -> bytes:
        request: ByteRequest | None = None
        if start is not None or end is not None:
            # Ranges clamped here: Icechunk answers one past an object's end with a byte.
            size = await self._size(state, key)
            first = _bound(start or 0, size)
            last = size if end is None else _bound(end, size)
            if last <= first:
                return b""
            request = RangeByteRequest(first, last) if last < size else OffsetByteRequest(first)
        found = await _guarded(self._fetched(state, key, request))
        if found is None:
            raise FileNotFoundError(key)
        return found.to_bytes()  # type: ignore[no-any-return]

    async def _fetched(self, state: BranchState, key: str, request: ByteRequest | None) -> Any:
        """The buffer of `key`; VirtualChunkRefused when it is a virtual chunk that cannot be
        read however often it is asked for (its container not authorized: `containers`)."""
        try:
            return await state.store.get(key, default_buffer_prototype(), request)
        except icechunk.IcechunkError as e:
            refusal = self._containers.refusal(str(e))
            if refusal is None:
                raise
            raise VirtualChunkRefused(refusal) from None

    async def _size(self, state: BranchState, key: str) -> int:
        if not key or not await _guarded(state.store.exists(key)):
            raise FileNotFoundError(key)
        return int(await _guarded(state.store.getsize(key)))

    async def _info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        state = await self._current(follow=True)
        key = key_of(path)
        try:
            return self._file_entry(state, key, await self._size(state, key))
        except FileNotFoundError:
            if not key or await self._has_children(state, key):
                return directory_entry(key)
            raise

    async def _has_children(self, state: BranchState, key: str) -> bool:
        async for _ in _guarded_iter(state.store.list_dir, key + "/"):
            return True
        return False

    async def _ls(self, path: str, detail: bool = True, **kwargs: Any) -> list[Any]:
        state = await self._current(follow=False)
        key = key_of(path)
        entries = []
        async for name in _guarded_iter(state.store.list_dir, key + "/" if key else ""):
            child = join(key, name.rstrip("/"))
            try:
                entries.append(self._file_entry(state, child, await self._size(state, child)))
            except FileNotFoundError:
                entries.append(directory_entry(child))
        if not entries and key and not await self._has_children(state, key):
            raise FileNotFoundError(key)
        return entries if detail else [entry["name"] for entry in entries]

    async def _find(self, path: str, maxdepth: int | None = None, withdirs: bool = False,
                    detail: bool = False, **kwargs: Any) -> Any:
        state = await self._current(follow=detail)
        key = key_of(path)
        keys = [k async for k in _guarded_iter(state.store.list_prefix, key + "/" if key else "")]
        if not detail:
            return sorted(path_of(k) for k in keys)
        sizes = await asyncio.gather(*(_guarded(state.store.getsize(k)) for k in keys))
        return {path_of(k): self._file_entry(state, k, int(n)) for k, n in zip(keys, sizes, strict=True)}

    def _file_entry(self, state: BranchState, key: str, size: int) -> dict[str, Any]:
        return {"name": path_of(key), "size": size, "type": "file",
                "generation": self._generation(state, key)}

    def _generation(self, state: BranchState, key: str) -> str:
        return state.generations.of(key) if self._writer is None else self._writer.generation(key)

    # -- writes (`commits_on_sync`) ---------------------------------------------------------------

    async def _put_if(self, path: str, expect: str | None, *, check: bool, data: bytes,
                      commit: bool) -> str:
        """Put `path` if its generation is still `expect` (unless not `check`), committed
        at once if `commit`; its new generation."""
        writer = self._writes()
        generation = await _guarded(writer.put(key_of(path), data, expect, check))
        if commit:
            await _guarded(writer.commit([key_of(path)]))
        return generation  # type: ignore[no-any-return]

    async def _delete_if(self, path: str, expect: str | None, *, check: bool) -> None:
        await _guarded(self._writes().delete(key_of(path), expect, check))

    async def _commit(self, paths: list[str], expect: None = None, *, check: bool = False) -> None:
        """Return once the writes of `paths` (and all before them) are committed."""
        try:
            await _guarded(self._writes().commit([key_of(path) for path in paths]))
        except FileNotFoundError as e:  # (never "missing": a sync that failed)
            raise OSError(str(e)) from None
        except ConflictError as e:  # (named by paths, as asked)
            raise ConflictError(*map(path_of, e.keys)) from None

    async def _remove_prefix(self, path: str) -> int:
        """Delete the node at `path` and everything below it, committed; how many keys."""
        writer = self._writes()
        count = await _guarded(writer.delete_tree(key_of(path)))
        await _guarded(writer.commit([key_of(path)]))
        return count  # type: ignore[no-any-return]

    async def _move_prefix(self, old: str, new: str) -> int:
        """Move the node at `old` to `new` (copied, then deleted), in one commit; how many keys."""
        writer = self._writes()
        count = await _guarded(writer.copy_tree(key_of(old), key_of(new)))
        await _guarded(writer.delete_tree(key_of(old)))
        await _guarded(writer.commit([key_of(old)]))
        return count  # type: ignore[no-any-return]

    def _writes(self) -> BranchWriter:
        if self._writer is None:
            raise PermissionError("the Icechunk mount is read-only")
        return self._writer


class VirtualChunkRefused(PermissionError):
    """A virtual chunk the mount may not or cannot read (its container not authorized, or
    its file gone). A PermissionError so that the store does not retry it: waiting will not
    change the answer. Not EACCES: the reader is not refused, the repository is wrong."""


async def _guarded(awaitable: Any) -> Any:
    """Icechunk's errors as fsspec's: a key that cannot exist is missing; the rest are
    faults of the storage (OSError: retried until the deadline)."""
    try:
        return await awaitable
    except KeyError as e:
        raise FileNotFoundError(str(e)) from None
    except icechunk.IcechunkError as e:
        if any(words in str(e) for words in _NOT_A_KEY):
            raise FileNotFoundError(first_line(e)) from None
        raise OSError(first_line(e)) from None


async def _guarded_iter(lister: Any, prefix: str) -> Any:
    """What `lister(prefix)` lists, Icechunk's errors as `_guarded`'s (a prefix that is no
    node lists nothing)."""
    try:
        async for item in lister(prefix):
            yield item
    except icechunk.IcechunkError as e:
        if not any(words in str(e) for words in _NOT_A_KEY):
            raise OSError(first_line(e)) from None


def _bound(offset: int, size: int) -> int:
    return max(0, min(size, size + offset if offset < 0 else offset))


