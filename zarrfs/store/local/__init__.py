"""Local files: reads that know which version of a file they read (`files`), atomic
replacement, compare-and-swap between processes, and which bytes are in the page cache
(`page_cache`)."""

from .files import (
    TEMP_PREFIX,
    delete_if,
    fsync_directory,
    generation_of,
    read,
    read_cached,
    read_edge_cached,
    read_whole_cached,
    remove_stale_temporaries,
    replace_if,
    temporary_owner_alive,
    writable,
    write_atomically,
)

__all__ = ["TEMP_PREFIX", "delete_if", "fsync_directory", "generation_of", "read", "read_cached",
           "read_edge_cached", "read_whole_cached", "remove_stale_temporaries", "replace_if",
           "temporary_owner_alive", "writable", "write_atomically"]
