"""An Icechunk repository at one snapshot, and the following of a branch: its head looked
up again at most once a second, and the keys a commit changed found from the snapshots' diff
(zarrfs.store.icechunk.filesystem serves the keys)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import icechunk
from zarr.core.buffer import default_buffer_prototype

PROTOCOL = "icechunk"
HEAD_LOOKUP_SECONDS = 1.0  # a branch's head is looked up at most this often
_NO_SUCH_REF = ("ref not found", "invalid snapshot id", "snapshot not found", "not found")


@dataclass(frozen=True)
class Generations:
    """The snapshot each key last changed in, as far as the mount has followed its branch:
    `epochs[0]` for every key not changed since the mount began."""

    epochs: tuple[str, ...]
    keys: dict[str, int] = field(default_factory=dict)
    # Whole subtrees (arrays and groups added or deleted) changed at an epoch.
    prefixes: dict[str, int] = field(default_factory=dict)

    def of(self, key: str) -> str:
        epoch = self.keys.get(key, 0)
        parts = key.split("/")
        for depth in range(1, len(parts) + 1):
            epoch = max(epoch, self.prefixes.get("/".join(parts[:depth]), 0))
        return self.epochs[epoch]

    def advanced(self, snapshot: str, keys: Iterable[str], prefixes: Iterable[str]) -> Generations:
        epoch = len(self.epochs)
        return Generations((*self.epochs, snapshot), {**self.keys, **dict.fromkeys(keys, epoch)},
                           {**self.prefixes, **dict.fromkeys(prefixes, epoch)})

    def restarted(self, snapshot: str) -> Generations:
        """Every key changed (the branch was reset to a snapshot the old one does not lead to)."""
        return Generations((snapshot,))


@dataclass(frozen=True)
class Changed:
    """The keys changed between two snapshots, and the subtrees added or deleted whole."""

    keys: set[str] = field(default_factory=set)
    prefixes: set[str] = field(default_factory=set)

    def covers(self, key: str) -> bool:
        parts = key.split("/")
        return key in self.keys or any("/".join(parts[:n]) in self.prefixes for n in range(1, len(parts) + 1))


class BranchState:
    """A repository at one snapshot: its session, and the generations of its keys. Replaced
    whole when a followed branch moves, so a reader always holds one consistent pair."""

    def __init__(self, repository: icechunk.Repository, branch: str | None,
                 session: icechunk.Session, generations: Generations) -> None:
        self.repository = repository
        self.branch = branch  # followed; None for a tag or snapshot id
        self.session = session
        self.store = session.store
        self.generations = generations
        self.looked_up = time.monotonic()

    @classmethod
    async def open(cls, repository: icechunk.Repository, ref: str) -> BranchState:
        branch, snapshot = await resolve(repository, ref)
        session = await repository.readonly_session_async(snapshot_id=snapshot)
        return cls(repository, branch, session, Generations((snapshot,)))

    async def at_head(self) -> BranchState:
        """This state, or the branch's new head once it moved (looked up at most once a
        second)."""
        if self.branch is None or time.monotonic() - self.looked_up < HEAD_LOOKUP_SECONDS:
            return self
        self.looked_up = time.monotonic()
        head = await self.repository.lookup_branch_async(self.branch)
        if head == self.session.snapshot_id:
            return self
        return (await self.moved_to(await self.repository.readonly_session_async(snapshot_id=head)))[0]

    async def moved_to(self, session: icechunk.Session,
                       old: str | None = None) -> tuple[BranchState, Changed | None]:
        """The state at `session`'s snapshot, its keys' generations advanced by what changed
        since this one's (or since snapshot `old`: a session rebased in place); and what
        changed (None: every key, the branch was reset)."""
        old, new = old or self.session.snapshot_id, session.snapshot_id
        if old == new:
            return BranchState(self.repository, self.branch, session, self.generations), Changed()
        changed = await self._changed_since(old, session)
        if changed is None:  # not a descendant: the branch was reset
            return BranchState(self.repository, self.branch, session, self.generations.restarted(new)), None
        return (BranchState(self.repository, self.branch, session,
                            self.generations.advanced(new, changed.keys, changed.prefixes)), changed)

    async def resumed(self, generations: Iterable[str]) -> BranchState:
        """This state, its keys that no commit changed since one of `generations` (snapshots,
        the likeliest first) of that generation: the first of them this snapshot descends
        from, found by one diff (an earlier mount's entries in the disk cache serve what the
        commits since did not change)."""
        now = self.session.snapshot_id
        for old in generations:
            if old == now:
                return self
            changed = await self._changed_since(old, self.session)
            if changed is not None:
                return BranchState(self.repository, self.branch, self.session,
                                   Generations((old,)).advanced(now, changed.keys, changed.prefixes))
        return self

    async def _changed_since(self, old: str, session: icechunk.Session) -> Changed | None:
        """What changed from snapshot `old` to `session`'s (None: `old` is not an ancestor of
        it, or no longer kept)."""
        try:
            diff = await self.repository.diff_async(from_snapshot_id=old, to_snapshot_id=session.snapshot_id)
        except icechunk.IcechunkError:
            return None
        return Changed(*await changed_keys(diff, session.store))


async def open_repository(storage: icechunk.Storage) -> icechunk.Repository:
    try:
        return await icechunk.Repository.open_async(storage)
    except icechunk.IcechunkError as e:
        if "doesn't exist" in str(e) or "does not exist" in str(e):
            raise ValueError(f"not an Icechunk repository ({first_line(e)})") from None
        raise


async def resolve(repository: icechunk.Repository, ref: str) -> tuple[str | None, str]:
    """(the branch to follow, or None), and the snapshot id `ref` names now: a branch first,
    then a tag, then a snapshot id."""
    for lookup, follows in ((repository.lookup_branch_async, True), (repository.lookup_tag_async, False)):
        try:
            return (ref if follows else None), await lookup(ref)
        except icechunk.IcechunkError as e:
            unless_missing(e)
    try:
        return None, (await repository.lookup_snapshot_async(ref)).id
    except icechunk.IcechunkError as e:
        unless_missing(e)
    raise ValueError(f"no branch, tag or snapshot named {ref!r}")


def unless_missing(error: icechunk.IcechunkError) -> None:
    """Re-raise an error that does not say the ref is missing (the repository unreachable)."""
    if not any(words in str(error) for words in _NO_SUCH_REF):
        raise error


async def changed_keys(diff: icechunk.Diff, store: icechunk.IcechunkStore) -> tuple[set[str], set[str]]:
    """The keys a commit changed, and the subtrees it added or deleted."""
    prefixes = {key_of(p) for p in (*diff.new_arrays, *diff.new_groups, *diff.deleted_arrays,
                                  *diff.deleted_groups)}
    keys = {join(key_of(p), "zarr.json") for p in (*diff.updated_arrays, *diff.updated_groups)}
    for path, indices in diff.updated_chunks.items():
        array = key_of(path)
        encode = await chunk_key_encoder(store, array)
        if encode is None:
            prefixes.add(array)  # (an encoding not known here: every key of the array)
        else:
            keys.update(join(array, encode(tuple(index))) for index in indices)
    return keys, prefixes


async def chunk_key_encoder(store: icechunk.IcechunkStore, array: str) -> Any:
    """A function from chunk index to key, from the array's zarr.json (None: unknown)."""
    found = await store.get(join(array, "zarr.json"), default_buffer_prototype())
    if found is None:
        return None
    encoding = json.loads(found.to_bytes()).get("chunk_key_encoding") or {"name": "default"}
    name = encoding.get("name")
    separator = (encoding.get("configuration") or {}).get("separator")
    if name == "default":
        return lambda index: (separator or "/").join(["c", *map(str, index)])
    if name == "v2":
        return lambda index: (separator or ".").join(map(str, index)) or "0"
    return None


def key_of(path: str) -> str:
    if path.startswith(PROTOCOL + "://"):
        path = path[len(PROTOCOL) + 3:]
    return path.strip("/")

def path_of(key: str) -> str:
    """The filesystems' path of a repository key (`key_of`'s inverse; the root: "")."""
    return "/" + key if key else ""


def directory_entry(key: str) -> dict[str, Any]:
    """A node that is no key (a group without metadata, a level above versions), as fsspec's
    `info` describes a directory."""
    return {"name": path_of(key), "size": 0, "type": "directory"}


def join(prefix: str, name: str) -> str:
    return f"{prefix}/{name}" if prefix else name

def first_line(error: BaseException) -> str:
    """Icechunk's message without its report frame (`x ...`, context lines)."""
    for line in str(error).splitlines():
        text = line.strip().removeprefix("x ").strip()
        if text:
            return text
    return type(error).__name__
