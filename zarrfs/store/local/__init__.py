"""Local files: reads that know which version of a file they read (`files`), atomic
replacement, compare-and-swap between processes, which bytes are in the page cache
(`page_cache`), and the root they stay inside (`confined`: links that lead outside are not
followed, only regular files are read)."""

from ..values import Opened
from .confined import Root, open_below, opened
from .driver import LocalDriver
from .files import (
    delete,
    delete_if,
    exchange,
    fsync_directory,
    generation_of,
    move,
    read,
    read_cached,
    read_edge_cached,
    read_whole_cached,
    remove_stale_temporaries,
    remove_tree,
    replace_if,
    temporary_owner_alive,
    writable,
    write_atomically,
)

__all__ = ["LocalDriver", "Opened", "Root", "delete", "delete_if", "exchange",
           "fsync_directory", "generation_of", "move", "open_below", "opened", "read", "read_cached",
           "read_edge_cached", "read_whole_cached",
           "remove_stale_temporaries", "remove_tree", "replace_if", "temporary_owner_alive", "writable",
           "write_atomically"]
