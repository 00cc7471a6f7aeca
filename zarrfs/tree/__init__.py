"""The node tree a mount serves: names and inodes (`inodes`), groups, arrays and files (`tree`)."""

from .edits import Stale
from .inodes import (
    ARRAY,
    CHUNK,
    CHUNKS,
    DATA,
    GROUP,
    GROUP_VIEW,
    HEADER,
    METADATA,
    ROOT_INODE,
    UPLOAD,
    VERSION_DIR,
    Ref,
)
from .link_counts import directory_links
from .tree import Tree
from .versioned_tree import tree_of
from .versions import in_versions, takes_new_versions

__all__ = [
           "ARRAY",
           "CHUNK",
           "CHUNKS",
           "DATA",
           "GROUP",
           "GROUP_VIEW",
           "HEADER",
           "METADATA",
           "ROOT_INODE",
           "UPLOAD",
           "VERSION_DIR",
           "Ref",
           "Stale",
           "Tree",
           "directory_links",
           "in_versions",
           "takes_new_versions",
           "tree_of",
]
