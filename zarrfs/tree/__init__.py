"""The node tree a mount serves: names and inodes (`inodes`), groups, arrays and files (`tree`)."""

from .inodes import ARRAY, CHUNK, CHUNKS, DATA, GROUP, HEADER, METADATA, ROOT_INODE, Ref
from .tree import Stale, Tree

__all__ = ["ARRAY", "CHUNK", "CHUNKS", "DATA", "GROUP", "HEADER", "METADATA", "ROOT_INODE", "Ref",
           "Stale", "Tree"]
