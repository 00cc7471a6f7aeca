"""The options a source is opened with, in one value (`SourceOptions`): what carries them
into the store, whose families read their own there and make of them what their clients take
(a leaf module: the store's other modules and the sources they open all read it)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..declared import OptionValues, parse_seconds, valued

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
class SourceOptions:
    """The options a source is opened with: the `-o` options `given` (a mount's, or
    `OptionValues({AN_OPTION: value, ...})`), each read where it acts: the store's own here
    (`timeout_for`), each family's by its declaration (`given[ITS_OPTION]`), the object stores'
    made into fsspec's keywords (`sources.storage_options`). A program may add keywords for
    the fsspec filesystem that no option gives (`client`: a client's credentials and
    configuration, as tests and benchmarks reach their servers); an option given wins."""

    given: OptionValues = field(default_factory=OptionValues)
    client: Mapping[str, Any] = field(default_factory=dict)

    @property
    def remote_timeout(self) -> float:
        """The longest one operation of a remote store may take, retries included: `-o timeout=`,
        or 30 s."""
        timeout = self.given[TIMEOUT]
        return DEFAULT_REMOTE_TIMEOUT if timeout is None else timeout

    def timeout_for(self, *, remote: bool) -> float | None:
        """The bound on one operation of a store: none unless `remote` (a system call cannot
        be abandoned, and a local disk is not a network)."""
        return self.remote_timeout if remote else None
