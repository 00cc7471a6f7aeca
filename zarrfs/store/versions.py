"""What a store offers of its versions, for the tree's `.versions/` directory: the names of
its branches, tags and snapshots, the log of the mounted branch, and new tags and branches.
Only stores whose capabilities say so have versions (Icechunk repositories); every call goes
through the store's driver, with the store's deadline, as every other store operation.
"""

from __future__ import annotations

from .base import BaseStore
from .facets import VersionHistory
from .observe import LIST, OTHER, PUT

VERSIONS = ".versions"  # the directory at the root of a mount (a name no array can have)
BRANCHES, TAGS, SNAPSHOTS = "branches", "tags", "snapshots"
KINDS = (BRANCHES, TAGS, SNAPSHOTS)
LOG = "log"
MADE_BY_MKDIR = (BRANCHES, TAGS)  # kinds a new name can be made in (at the mounted branch's head)


class Catalog:
    """The versions of a store whose driver serves them (`Capabilities.versions`), through
    the driver's facet (`versions`)."""

    def __init__(self, store: BaseStore, versions: VersionHistory) -> None:
        self.store = store
        self.versions = versions

    def names(self, kind: str) -> list[str]:
        """The branches, tags or snapshots (reachable from a branch or tag) there are now."""
        key = f"{VERSIONS}/{kind}"
        found = self.store.call(key, lambda s: self.versions.names(s, kind), kind=LIST)
        return list(found or [])

    def log(self) -> bytes:
        """The mounted branch's commits, newest first, one a line: id, time (UTC), message."""
        found = self.store.call(f"{VERSIONS}/{LOG}", self.versions.log, kind=OTHER)
        return found or b""

    def create(self, kind: str, name: str) -> None:
        """A new tag or branch at the mounted branch's head (EditRefused: EEXIST, EINVAL)."""
        key = f"{VERSIONS}/{kind}/{name}"
        self.store.check_writable(key)
        self.store.call(key, lambda s: self.versions.create(s, kind, name),
                        missing_ok=False, kind=PUT)


def catalog_of(store: BaseStore) -> Catalog | None:
    """The store's versions, or None: it has none."""
    versions = store.driver.versions() if store.capabilities.versions else None
    return None if versions is None else Catalog(store, versions)
