"""The mount options of the disk cache: its directory, and how much of the disk it takes."""

from __future__ import annotations

from ...declared import parse_name, parse_size, valued

DISK_CACHE = valued(
    "disk_cache", "text", "DIR", parse_name, None,
    "keep what is read from a remote store (S3, GCS, Azure, Icechunk) in DIR, across mounts and restarts; "
    "mounts naming the same DIR share it; checked against the store as the memory cache is — see "
    "[operations.md](operations.md#disk-cache)")
DISK_CACHE_SIZE = valued(
    "disk_cache_size", "size", "SIZE", parse_size, 1 << 30,
    "with `disk_cache=`: the most of DIR the cache takes (default `1G`, at least `8M`)")
OPTIONS = (DISK_CACHE, DISK_CACHE_SIZE)
