"""What opening a source takes beyond fsspec's storage options (a leaf module: the store's
other modules and the sources they open all read it)."""

from __future__ import annotations

from dataclasses import dataclass

from ..declared import parse_seconds, valued

DEFAULT_REMOTE_TIMEOUT = 30.0
# What an unanswered close-to-open check means (`-o recheck`): a check waits for the store at
# most CHECK_SECONDS, then the mount serves what it has (its memory and disk caches) and asks
# again after OUTAGE_SECONDS.
CHECK_SECONDS, OUTAGE_SECONDS = 2.0, 10.0

# The store's own mount option (each family declares its own: `sources.OPTIONS`).
TIMEOUT = valued(
    "timeout", "seconds", "SECONDS", parse_seconds, None,
    "the longest any wait on the store may take, retries of transient faults included; past it the request "
    "fails with EIO (default 30 for a remote store, none for local files). It bounds the store's silence: a "
    "read needing many requests of a slow store that answers them may take longer — see "
    "[remote.md](remote.md#when-the-network-does-not-answer)")


@dataclass(frozen=True)
class SourceSettings:
    """What a source needs beyond fsspec's storage options."""

    # The longest one store operation may take, retries included (None: 30 s for remote
    # stores; local files are not bounded).
    timeout: float | None = None
    # Icechunk: the branch, tag or snapshot id to mount (None: the branch `main`).
    ref: str | None = None
    # `reference://` sources: the reference file or directory.
    fo: str | None = None
    # Reference sets: where referenced bytes may come from besides the reference set's own
    # directory (local) or bucket/host (remote).
    references_allow: tuple[str, ...] = ()
    # Icechunk mounts with -o rw: syncs within this many seconds share a commit (0: each
    # sync its own).
    commit_seconds: float = 0.0

    def timeout_for(self, *, remote: bool) -> float | None:
        """The bound on one operation of a store: none unless `remote` (a system call cannot
        be abandoned, and a local disk is not a network)."""
        if not remote:
            return None
        return DEFAULT_REMOTE_TIMEOUT if self.timeout is None else self.timeout
