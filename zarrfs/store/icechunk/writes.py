"""Writes to an Icechunk branch: a writable session whose changes become a commit where a
write to any other store would become durable (`sync_directories`, a metadata put, a node
deleted or moved, and the unmount).

A put that expects a generation is a compare-and-swap against the branch's head: the head is
looked up first, and when another writer committed, the session is rebased onto it (its keys'
generations advanced by the diff), so the write-back sees the conflict and merges element by
element. A key written here gets a generation of its own, kept across our own commits.

Between a put's check and the commit another writer's commit of the same key can land. The
session is then rebuilt on the new head with every change of ours but that key's (never one
side's whole chunk over the other's), the rest is committed, and the commit reports that key
displaced (ConflictError): the write-back reads the other writer's chunk, merges this mount's
written elements into it and commits again. A key put without expectation (a chunk written
whole, which replaces whatever is stored) keeps this mount's version.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable

import icechunk
from zarr.core.buffer import cpu, default_buffer_prototype

from ...errors import ConflictError
from .branches import BranchState, Changed, chunk_key_encoder, join, key_of

log = logging.getLogger("zarrfs.store")
COMMIT_ATTEMPTS = 20  # commits lost to other writers' in a row before a sync fails
SET, DELETE, DELETE_TREE = "set", "delete", "delete tree"


class BranchWriter:
    """The mount's writable session on its branch, and what it changed since its last commit."""

    def __init__(self, state: BranchState, group_seconds: float, timeout: float) -> None:
        self.state = state
        self.tokens: dict[str, str] = {}  # generations of keys written here
        self.pending: dict[str, str] = {}  # key -> SET, DELETE or DELETE_TREE, not committed
        self.lost: set[str] = set()  # keys whose change another writer's commit displaced
        self.unchecked: set[str] = set()  # keys put without expectation: ours whatever is there
        self.lock = SharedLock()
        self.timeout = timeout
        self.group = GroupCommit(group_seconds, self._commit_pending)
        self._numbers = itertools.count(1)

    @classmethod
    async def open(cls, state: BranchState, group_seconds: float, timeout: float) -> BranchWriter:
        assert state.branch is not None
        session = await state.repository.writable_session_async(state.branch)
        moved, _ = await state.moved_to(session)
        return cls(moved, group_seconds, timeout)

    def generation(self, key: str) -> str:
        return self.tokens.get(key) or self.state.generations.of(key)

    # -- writes ----------------------------------------------------------------------------------

    async def put(self, key: str, data: bytes, expect: str | None, check: bool) -> str:
        """Set `key` in the session if its generation is still `expect` (None: absent) at
        the branch's head (unless not `check`); its new generation."""
        if check:
            await self.follow()
        async with self.lock.shared():
            store = self.state.store
            if check:
                exists = await store.exists(key)
                if (self.generation(key) if exists else None) != expect:
                    raise ConflictError(key)
            await store.set(key, cpu.Buffer.from_bytes(data))
            self.pending[key] = SET
            self.lost.discard(key)
            (self.unchecked.add if not check else self.unchecked.discard)(key)
            token = self.tokens[key] = f"{self.state.session.snapshot_id}.w{next(self._numbers)}"
            return token

    async def delete(self, key: str, expect: str | None, check: bool) -> None:
        if check:
            await self.follow()
        async with self.lock.shared():
            store = self.state.store
            exists = await store.exists(key)
            if check and (self.generation(key) if exists else None) != expect:
                raise ConflictError(key)
            if exists:
                await store.delete(key)
                self.pending[key] = DELETE
            self.tokens.pop(key, None)

    async def delete_tree(self, prefix: str) -> int:
        """Delete every key below `prefix`; how many there were."""
        async with self.lock.shared():
            store = self.state.store
            try:
                count = len([k async for k in store.list_prefix(prefix + "/")])
                await store.delete_dir(prefix)
            except icechunk.IcechunkError as e:
                if "bad key prefix" not in str(e):
                    raise
                return 0  # (no node there any longer: its metadata was deleted first)
            self.pending[prefix] = DELETE_TREE
            for key in [k for k in self.tokens if k.startswith(prefix + "/")]:
                del self.tokens[key]
            return count

    async def copy_tree(self, old: str, new: str) -> int:
        """Copy every key below `old` to below `new`; how many."""
        store = self.state.store
        keys = [k async for k in store.list_prefix(old + "/")]
        for key in keys:
            found = await store.get(key, default_buffer_prototype())
            if found is not None:
                await self.put(new + key[len(old):], found.to_bytes(), None, check=False)
        return len(keys)

    # -- following the branch --------------------------------------------------------------------

    async def follow(self, every: float = 0.0) -> BranchState:
        """The state at the branch's head (looked up again unless one was looked up within
        `every` seconds), the session rebased onto it."""
        asked = asyncio.get_running_loop().time()
        async with self.lock.exclusive():
            if self.looked_up_at >= asked - every:
                return self.state
            await self._rebase()
        return self.state

    looked_up_at = float("-inf")

    async def _rebase(self) -> None:
        """(Exclusive.) Bring the session onto the branch's head."""
        self.looked_up_at = asyncio.get_running_loop().time()
        state = self.state
        assert state.branch is not None
        head = await state.repository.lookup_branch_async(state.branch)
        if head == state.session.snapshot_id:
            return
        old, session = state.session.snapshot_id, state.session
        if not session.has_uncommitted_changes:
            session = await state.repository.writable_session_async(state.branch)
        else:
            try:
                await session.rebase_async(icechunk.ConflictDetector())
            except icechunk.RebaseFailedError as e:
                session = await self._replayed(e.conflicts)
        self._moved(*await state.moved_to(session, old))

    def _moved(self, state: BranchState, changed: Changed | None) -> None:
        self.state = state
        for key in [k for k in self.tokens if changed is None or changed.covers(k)]:
            del self.tokens[key]

    async def _replayed(self, conflicts: Iterable[icechunk.Conflict]) -> icechunk.Session:
        """A new session at the branch's head holding every pending change of ours but those
        another writer's commit also made (they are lost: the next sync of them fails)."""
        state = self.state
        assert state.branch is not None
        clashing = await clashing_keys(conflicts, state.store)
        session = await state.repository.writable_session_async(state.branch)
        for key, change in list(self.pending.items()):
            if key not in self.unchecked and any(key == k or key.startswith(k + "/") for k in clashing):
                del self.pending[key]
                self.lost.add(key)
                log.info("%s: changed by this mount and by another writer's commit since; merging "
                         "this mount's writes into it", describe_key(key))
            elif change == SET:
                found = await state.store.get(key, default_buffer_prototype())
                if found is not None:
                    await session.store.set(key, found)
            elif change == DELETE:
                with contextlib.suppress(KeyError):
                    await session.store.delete(key)
            else:
                await session.store.delete_dir(key)
        return session

    # -- commits ---------------------------------------------------------------------------------

    async def commit(self, keys: Iterable[str]) -> None:
        """Return once the changes to `keys` (and all before them) are in a commit on the
        branch; ConflictError naming those another writer's commit displaced (to merge again)."""
        await self.group.wait()
        displaced = [key for key in keys if key in self.lost]
        self.lost.difference_update(displaced)
        if displaced:
            raise ConflictError(*displaced)

    async def commit_everything(self) -> None:
        await self._commit_pending()

    async def _commit_pending(self) -> None:
        async with self.lock.exclusive():
            await asyncio.wait_for(self._commit_now(), self.timeout)

    async def _commit_now(self) -> None:
        """(Exclusive.) Commit the session, rebased onto other writers' commits that landed
        first; a new writable session at the branch's head."""
        for _ in range(COMMIT_ATTEMPTS):
            session = self.state.session
            if not session.has_uncommitted_changes:
                self.pending.clear()
                return
            try:
                snapshot = await session.commit_async(commit_message(session.status()))
            except icechunk.ConflictError:
                await self._rebase()  # another writer's commit landed first
                continue
            self.pending.clear()
            log.info("committed %s to branch %s", snapshot, self.state.branch)
            assert self.state.branch is not None
            # (the committed session is read-only now, at the new snapshot)
            committed = BranchState(self.state.repository, self.state.branch, session, self.state.generations)
            fresh = await self.state.repository.writable_session_async(self.state.branch)
            self._moved(*await committed.moved_to(fresh))
            return
        raise OSError(f"branch {self.state.branch}: other writers' commits kept landing first")


class GroupCommit:
    """Commits shared by the syncs that ask within `seconds` of each other (0: each its own).
    A sync returns once a commit begun after it asked has landed."""

    def __init__(self, seconds: float, commit: Callable[[], Awaitable[None]]) -> None:
        self.seconds = seconds
        self._commit = commit
        self._next: asyncio.Future[None] | None = None

    async def wait(self) -> None:
        if self.seconds <= 0:  # (shielded: a caller's deadline ends its wait, not the commit)
            task = asyncio.ensure_future(self._commit())
            task.add_done_callback(_retrieved)
            await asyncio.shield(task)
            return
        loop = asyncio.get_running_loop()
        if self._next is None:
            self._next = loop.create_future()
            loop.call_later(self.seconds, self._start)
        await asyncio.shield(self._next)

    def _start(self) -> None:
        future, self._next = self._next, None
        assert future is not None
        task = asyncio.ensure_future(self._commit())
        task.add_done_callback(lambda done: _settle(future, done))


def _settle(future: asyncio.Future[None], done: asyncio.Future[None]) -> None:
    if done.cancelled():
        future.set_exception(OSError("the commit was cancelled"))
    elif done.exception() is not None:
        future.set_exception(done.exception())  # type: ignore[arg-type]
    else:
        future.set_result(None)
    _retrieved(future)


def _retrieved(done: asyncio.Future[None]) -> None:
    """(An outcome no caller waits for any longer is not reported as never retrieved.)"""
    if not done.cancelled():
        done.exception()


class SharedLock:
    """Puts share it; a rebase or a commit holds it alone (the session must not change under
    them)."""

    def __init__(self) -> None:
        self._changed = asyncio.Condition()
        self._sharing = 0
        self._alone = False

    @contextlib.asynccontextmanager
    async def shared(self) -> AsyncIterator[None]:
        async with self._changed:
            await self._changed.wait_for(lambda: not self._alone)
            self._sharing += 1
        try:
            yield
        finally:
            async with self._changed:
                self._sharing -= 1
                self._changed.notify_all()

    @contextlib.asynccontextmanager
    async def exclusive(self) -> AsyncIterator[None]:
        async with self._changed:
            await self._changed.wait_for(lambda: not self._alone and not self._sharing)
            self._alone = True
        try:
            yield
        finally:
            async with self._changed:
                self._alone = False
                self._changed.notify_all()


def commit_message(changes: icechunk.Diff) -> str:
    """What a commit changed, in a line: arrays with how many chunks, metadata, nodes."""
    parts = [f"{key_of(path) or '/'}: {len(chunks)} chunk{'s' if len(chunks) != 1 else ''}"
             for path, chunks in sorted(changes.updated_chunks.items()) if chunks]
    for words, paths in (("new", {*changes.new_arrays, *changes.new_groups}),
                         ("metadata of", {*changes.updated_arrays, *changes.updated_groups}),
                         ("deleted", {*changes.deleted_arrays, *changes.deleted_groups})):
        if paths:
            parts.append(f"{words} {', '.join(key_of(p) or '/' for p in sorted(paths))}")
    return "zarrfs: " + ("; ".join(parts) or "no changes")


async def clashing_keys(conflicts: Iterable[icechunk.Conflict], store: icechunk.IcechunkStore) -> set[str]:
    """The keys (or subtrees) the conflicts of a failed rebase are about."""
    keys: set[str] = set()
    for conflict in conflicts:
        node = key_of(conflict.path)
        chunks = conflict.conflicted_chunks or []
        encode = await chunk_key_encoder(store, node) if chunks else None
        if conflict.conflict_type == icechunk.ConflictType.ZarrMetadataDoubleUpdate:
            keys.add(join(node, "zarr.json"))
        elif encode is not None:
            keys.update(join(node, encode(tuple(index))) for index in chunks)
        else:
            keys.add(node)
    return keys


def describe_key(key: str) -> str:
    """`array A, chunk c/0/1` for a v3 chunk key; the key itself otherwise."""
    array, marker, rest = ("/" + key).rpartition("/c/")
    return f"array {array.lstrip('/') or '/'}, chunk c/{rest}" if marker else f"key {key}"
