"""What the rest of zarrfs may know of one Zarr format: the names of its files and what its
groups can hold. Each format's module declares its `FORMAT`; `registry` finds a node's."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Format:
    zarr_format: int
    metadata_file: str  # an array's metadata document
    attributes_file: str  # where a node's attributes are kept
    group_file: str | None  # a group's document (None: the format has no groups)
    consolidated_file: str | None  # where a group keeps consolidated metadata (None: never)
    child_formats: tuple[int, ...]  # the formats of the nodes its groups can hold

    @property
    def attributes_in_metadata(self) -> bool:
        """Attributes are a member of the metadata document (rewriting them rewrites it)."""
        return self.attributes_file == self.metadata_file

    @property
    def consolidated_apart(self) -> str | None:
        """The consolidated metadata's own document, when it is not the group's."""
        return None if self.consolidated_inline else self.consolidated_file

    @property
    def consolidated_inline(self) -> bool:
        """Consolidated metadata is a member of the group's own document, which may lack it."""
        return self.consolidated_file is not None and self.consolidated_file == self.group_file
