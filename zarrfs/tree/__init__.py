"""The node tree a mount serves: names and inodes (`inodes`), groups, arrays and files (`tree`)."""

from .edits import Stale
from .inodes import ARRAY, CHUNK, CHUNKS, DATA, GROUP, GROUP_VIEW, HEADER, METADATA, ROOT_INODE, UPLOAD, Ref
from .tree import Tree

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
           "Ref",
           "Stale",
           "Tree",
]
