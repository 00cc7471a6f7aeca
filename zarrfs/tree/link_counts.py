"""`st_nlink` of a directory: 2 + its subdirectories, as on every Unix filesystem (find and
other walkers use it to stop looking for subdirectories), where the tree knows them without
asking the store; 1 where it does not, the convention for "not counted" that those walkers
honour (a stat of every directory must not cost a listing on S3)."""

from __future__ import annotations

from .inodes import ARRAY, CHUNKS, GROUP, Ref
from .tree import Tree

NOT_COUNTED = 1


def directory_links(tree: Tree, ref: Ref) -> int:
    if ref.role == GROUP:
        return _group_links(tree, ref)
    if ref.role == ARRAY:
        return _array_links(tree, ref)
    if ref.role == CHUNKS:
        return _chunks_links(tree, ref)
    return NOT_COUNTED  # (`.versions/` and its directories)


def _group_links(tree: Tree, ref: Ref) -> int:
    """Its children are groups and arrays, all directories: counted once every one is known
    (consolidated metadata, or listed: `ls`), never listed for it."""
    if tree.node(ref.path) is None:
        return NOT_COUNTED
    children = tree.children_of(ref.path)
    if not children.complete:
        return NOT_COUNTED
    versions = 1 if ref == tree.root and tree.shows_versions else 0  # (`.versions/`)
    return 2 + len(children.known()) + versions


def _array_links(tree: Tree, ref: Ref) -> int:
    """An array's only subdirectory is `chunks/` (its other entries are files). One that
    cannot be opened (metadata only, or strings) has none, but 3 is the count of any array
    that opens, and a count too high only costs a walker a look (too low would hide one)."""
    return 3


def _chunks_links(tree: Tree, ref: Ref) -> int:
    """Nested chunk keys ("/" separator) are directories down to the last dimension."""
    if tree.opened_array(ref.path) is None:  # (not opened here: opening it is not for a stat)
        return NOT_COUNTED
    directory = tree.open_array(ref.path).directory  # (opened: no store request)
    if directory is None:
        return NOT_COUNTED
    names = directory.names
    entries = names.names(ref.parts)
    if not entries:
        return 2
    first = names.resolve((*ref.parts, entries[0]))
    return 2 + len(entries) if first is not None and first[0] == "dir" else 2
