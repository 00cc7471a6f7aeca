"""The options of a mount and of a server (`zarrfs mount -o`, `zarrfs serve -o`): their own,
declared here, composed with those each view family and each store family declares where it
acts (`zarrfs.declared`), and parsed once from `-o a,b=c` strings into one frozen value: the
options a tree is served with (`TreeOptions`, a server's), or those and the kernel's
(`MountOptions`, a mount's). Their own are their fields; the families' reach them in `given`,
which the daemon and the tree carry unread (`layout`: the views', `source`: the store's)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from typing import Any, Self, TypeVar

from .declared import (
    Declared,
    Option,
    OptionError,
    OptionValues,
    boolean,
    flag,
    parse_count,
    parse_name,
    parse_positive,
    parse_size,
    valued,
)
from .formats.creation import check_codec
from .store.disk_cache import DISK_CACHE
from .store.opening import OPTIONS as STORE_OPTIONS
from .store.settings import CHECK_SECONDS as CHECK_SECONDS  # (for the fuse layer too)
from .store.settings import SourceOptions
from .views.array_dir import OPTIONS as VIEW_OPTIONS
from .views.array_dir import ViewSettings

__all__ = ["CHECK_SECONDS", "DECLARED", "STATS_XATTR", "MountOptions", "OptionError",
           "TreeOptions", "parse_size"]

T = TypeVar("T")
STATS_XATTR = "user.zarrfs.stats"  # the root's attribute `zarrfs stats` reads (fuse and daemon)

# Accepted and dropped: mount(8) and systemd pass these; they mean nothing to the daemon.
_IGNORED = {"defaults", "auto", "noauto", "nofail", "_netdev", "user", "users", "nouser", "owner", "comment"}
_IGNORED_PREFIXES = ("x-systemd.", "x-", "comment=")
_CREDENTIALS = {"key", "secret", "token", "password", "aws_access_key_id",
                "aws_secret_access_key", "aws_session_token", "account_key", "sas_token",
                "connection_string", "credential", "client_secret"}


def _parse_chunks(text: str) -> tuple[int, ...]:
    """`256:256` (colon-separated: -o itself splits on commas)."""
    chunks = tuple(int(part) for part in text.split(":"))
    if min(chunks) < 1:
        raise ValueError(text)
    return chunks


def _parse_address(text: str) -> tuple[str, int]:
    """`HOST:PORT` (an IPv6 host in brackets: `[::1]:9100`); port 0 is any free port."""
    host, _, port = text.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    number = int(port)
    if not host or not 0 <= number < 65536:
        raise ValueError(text)
    return host, number


def _parse_recheck(text: str) -> float | None:
    """`open` (0), `never` (None), or seconds (> 0) between rechecks of open files."""
    if text in ("open", "never"):
        return 0.0 if text == "open" else None
    seconds = float(text)
    if not 0 < seconds < 1e9:
        raise ValueError(text)
    return seconds


# -- the mount's own options, in the order the help shows them ---------------------------------

ACCESS: Option[str | None] = Option(
    "ro", "words", None,
    "read-only / read-write mount (default `rw`; a store that cannot be written is mounted read-only)",
    words={"ro": "ro", "rw": "rw"})
ALLOW_OTHER = flag(
    "allow_other",
    "let users other than the one who mounted access the files; implies `default_permissions` (non-root "
    "users need `user_allow_other` in `/etc/fuse.conf`)", mount_only=True)
DEFAULT_PERMISSIONS = flag(
    "default_permissions", "let the kernel check file modes against `uid`/`gid`/`umask`", mount_only=True)
UID = valued(
    "uid", "integer", "N", parse_count, None,
    "owner of the files (default: the user who mounted)", mount_only=True)
GID = valued(
    "gid", "integer", "N", parse_count, None,
    "group of the files (default: the group of the user who mounted)", mount_only=True)
UMASK = valued(
    "umask", "octal", "OCTAL", lambda text: int(text, 8), 0o022,
    "permission bits to clear from the files' modes (default `022`)", mount_only=True)
CACHE = valued(
    "cache", "size", "SIZE", parse_size, 256 << 20,
    "size of the chunk cache, e.g. `512M`, `1G` (default `256M`)")
READAHEAD = valued(
    "readahead", "integer", "KB", parse_count, None,
    "the kernel's readahead for the mount (default: what the array's chunks afford, 8 for small chunks up "
    "to 1024; 1024 for a group; see [performance.md](performance.md#read-ahead-priced-in-requests))",
    mount_only=True)
DEBUG = flag("debug", "log every request")
LOG = valued(
    "log", "text", "FILE", str, None,
    "write the log to FILE (default: stderr with `-f`, else syslog if `/dev/log` exists)", mount_only=True)
THREADS = valued(
    "threads", "integer", "N", parse_positive, None,
    "worker threads for decoding and store I/O (default: one per CPU; 32 for a remote store, whose "
    "requests wait on the network, but one per CPU while a disk cache serves its reads)")
PUSH_PAGES = boolean(
    "push_pages", True,
    "slabs decoded ahead of a sequential reader of `data` (and of `data.npy`, `.nii`, `.mrc`, `.fits`) are "
    "put into the kernel's page cache by threads of their own, so the reader finds its pages there and the "
    "mount's one request loop answers only what the kernel still asks for (default `true`; never into a "
    "file opened for writing; see [performance.md](performance.md#pages-pushed))", mount_only=True)
DIRECT_IO = flag(
    "direct_io",
    "bypass the kernel page cache: every read goes to zarrfs, and `mmap` (`np.memmap`) fails with ENODEV",
    mount_only=True)
RECHECK: Option[float | None] = Option(
    "recheck", "seconds", 0.0,
    "when to look for other writers' changes: at every open (default; close-to-open, as NFS), also every "
    "SECONDS for open files, or never (immutable data); with `open` or SECONDS, listing a group or looking "
    "up a name it lacks also shows other writers' new and deleted arrays and groups (at most once a second "
    "per group) — see [consistency.md](consistency.md), [workspace.md](workspace.md#other-writers-nodes)",
    ("open", "SECONDS", "never"), _parse_recheck)
NEW_CODEC = valued(
    "new_codec", "text", "NAME[:LEVEL]", check_codec, "zstd",
    "codec of arrays made by writing `NAME.npy` into a group: `zstd` (default, level 3), `gzip` (6), "
    "`blosc[:CNAME]` (lz4, 5) or `none`, as `zarrfs create --codec` — see "
    "[workspace.md](workspace.md#arrays-from-npy-files)", mount_only=True)
NEW_CHUNKS = valued(
    "new_chunks", "list", "N:N:...", _parse_chunks, None,
    "chunk shape of arrays made from `.npy` files (colon-separated; default: about 1 MiB of whole rows of "
    "the last dimensions, as `zarrfs create` without `--chunks`)", mount_only=True)
METRICS = valued(
    "metrics", "address", "HOST:PORT", _parse_address, None,
    "serve Prometheus metrics on `http://HOST:PORT/metrics` (port `0`: any free port, named in the log); "
    "off by default — see [operations.md](operations.md)", mount_only=True)
FILL_MISSING_DATA_READS = boolean(
    "fill_missing_data_reads", True,
    "TensorStore's zarr3 option of that name and default: \"Replace missing chunks with the fill value when "
    "reading. If disabled, reading a missing chunk will result in an error. Note that the fill value may "
    "still be used when writing a partial chunk.\" With `false`, a read that touches a chunk (or inner "
    "chunk) that is not stored fails with EIO and the log names its key; stored chunks read as before, and "
    "a write into a missing chunk is merged with the fill value. `data` is read through the page cache in "
    "whole pages: add `direct_io` to read exactly the bytes asked for")
STORE_DATA_EQUAL_TO_FILL_VALUE = boolean(
    "store_data_equal_to_fill_value", False,
    "TensorStore's zarr3 option of that name and default: \"Store all explicitly written data, even if it "
    "is equal to the fill value.\" With `false` a chunk (or inner chunk) written equal to the fill value is "
    "deleted from the store, as zarr-python does")
USER = valued(
    "user", "text", "NAME", parse_name, None,
    "the daemon does every store access as NAME (a name or a uid), with NAME's groups: root mounts, then "
    "gives root up; a chunk NAME may not read fails with EIO, what the mount writes belongs to NAME, and "
    "NAME owns the mount (`zarrfs stats` shows the user) — see [What a mount trusts](#what-a-mount-trusts)")
GROUP = valued(
    "group", "text", "GROUP", parse_name, None,
    "with `user=`: GROUP as the daemon's group, in place of NAME's own", shown=("user=NAME,group=GROUP",))
_KERNEL_WORDS = ("nodev", "dev", "nosuid", "suid", "noexec", "exec", "noatime", "atime", "relatime",
                 "norelatime", "sync", "async", "dirsync")
KERNEL: Option[frozenset[str]] = Option(
    "kernel", "words", frozenset(), "passed to the kernel unchanged",
    words={word: frozenset({word}) for word in _KERNEL_WORDS}, join=frozenset.union, mount_only=True)


def _own(option: Option[T]) -> T:
    """A field of `MountOptions`: the value of one of the mount's own options."""
    made: T = field(default=option.default, metadata={"option": option})
    return made


@dataclass(frozen=True)
class TreeOptions:
    """The options a tree is served with, by a mount and by `zarrfs serve` alike: the mount's
    own options that are not the kernel's, and every option given (`given`: the views' and the
    store's, read where they act). Parsing takes every declared option: the kernel's ones mean
    nothing here, and are ignored."""

    access: str | None = _own(ACCESS)  # "ro", "rw" (`-o rw` given: a source never written is refused), None
    cache_bytes: int = _own(CACHE)
    debug: bool = _own(DEBUG)
    threads: int | None = _own(THREADS)
    # Close-to-open with other writers: check the store when a file is opened ("open", 0.0),
    # also every N seconds while it is open (N), or never (None).
    recheck: float | None = _own(RECHECK)
    # TensorStore's zarr3 driver options, by its names and defaults.
    fill_missing_data_reads: bool = _own(FILL_MISSING_DATA_READS)
    store_data_equal_to_fill_value: bool = _own(STORE_DATA_EQUAL_TO_FILL_VALUE)
    # The user (and group) the daemon does its store I/O as once root has mounted
    # (zarrfs.daemon.privileges); None: the user that runs it.
    user: str | None = _own(USER)
    group: str | None = _own(GROUP)
    # Every option given, the families' read where they act (`layout`, `source`).
    given: OptionValues = field(default_factory=OptionValues)

    @classmethod
    def parse(cls, groups: Iterable[str]) -> Self:
        """Parse `-o` arguments ("ro,cache=1G", ...); later options win."""
        items = [item for item in (part.strip() for group in groups for part in group.split(",")) if item]
        given = OptionValues.parsed(DECLARED, (item for item in items if _kept(item)))  # (each in turn)
        if GROUP in given and USER not in given:
            raise OptionError("option group= needs user= (the daemon would stay root)")
        return cls(**{f.name: given[f.metadata["option"]] for f in fields(cls) if "option" in f.metadata},
                   given=given)

    @property
    def read_only(self) -> bool:
        return self.access == "ro"

    @property
    def read_write(self) -> bool:
        """`-o rw` given (not only the default): a source that is never written (a zip) is refused."""
        return self.access == "rw"

    @property
    def view_settings(self) -> ViewSettings:
        """How the tree lays out every array's files (the views' options)."""
        return ViewSettings(self.given)

    @property
    def source(self) -> SourceOptions:
        """The options the store opens the source with (the store's and its families')."""
        return SourceOptions(self.given)

    @property
    def disk_cache(self) -> str | None:
        """The disk cache's directory (`-o disk_cache=`), or None."""
        return self.given[DISK_CACHE]


@dataclass(frozen=True)
class MountOptions(TreeOptions):
    """The options of a mount: the tree's, and the kernel's (what FUSE and the kernel are told,
    the files' owners and modes, the daemon's log and metrics, pages pushed)."""

    allow_other: bool = _own(ALLOW_OTHER)
    default_permissions: bool = _own(DEFAULT_PERMISSIONS)
    uid: int | None = _own(UID)
    gid: int | None = _own(GID)
    umask: int = _own(UMASK)
    readahead_kb: int | None = _own(READAHEAD)  # (None: chosen from the array's chunks, daemon.kernel_window)
    log_file: str | None = _own(LOG)
    # Slabs decoded ahead of a sequential reader are pushed into the kernel's page cache from
    # threads of their own (zarrfs.fuse.pages); False: the reader's requests fetch every page.
    push_pages: bool = _own(PUSH_PAGES)
    direct_io: bool = _own(DIRECT_IO)
    # Arrays made by writing NAME.npy into a group: their codec and chunk shape (None: about
    # 1 MiB, `formats.creation.auto_chunks`).
    new_codec: str = _own(NEW_CODEC)
    new_chunks: tuple[int, ...] | None = _own(NEW_CHUNKS)
    # Where the daemon serves Prometheus metrics (host, port; port 0: any free port), or
    # None: no metrics (zarrfs.daemon.metrics).
    metrics: tuple[str, int] | None = _own(METRICS)
    kernel_options: frozenset[str] = _own(KERNEL)

    @property
    def file_uid(self) -> int:
        return os.geteuid() if self.uid is None else self.uid

    @property
    def file_gid(self) -> int:
        return os.getegid() if self.gid is None else self.gid

    def fuse_options(self, fsname: str) -> set[str]:
        """Options for pyfuse3.init (what shows in /proc/mounts; no credentials in it)."""
        options = {f"fsname={fsname}", "subtype=zarrfs", *self.kernel_options}
        if self.read_only:
            options.add("ro")
        if self.allow_other:
            options.add("allow_other")
        if self.default_permissions or self.allow_other:
            # Other users may reach the files; the kernel must check permissions for them.
            options.add("default_permissions")
        return options


def _kept(item: str) -> bool:
    """Whether `item` is an option (not what mount(8) and systemd pass, which is dropped);
    OptionError: it would put a credential on the command line."""
    name, has_value, _ = item.partition("=")
    if name in _CREDENTIALS:
        raise OptionError(f"option {name!r}: credentials are read from the environment or the "
                          "store's config files, never from mount options")
    return not ((name in _IGNORED and not has_value) or name.startswith(_IGNORED_PREFIXES))


# Every option the mount takes, in the order `zarrfs options` and docs/usage.md show them: the
# mount's own (the fields of `MountOptions` and `TreeOptions`), the views' (the array directory's
# and each family's: views.registry), the store's (its own and each family's: store.sources), and
# last those passed to the kernel.
OWN: tuple[Option[Any], ...] = (ACCESS, ALLOW_OTHER, DEFAULT_PERMISSIONS, UID, GID, UMASK, CACHE, READAHEAD,
                                DEBUG, LOG, THREADS, PUSH_PAGES, DIRECT_IO, RECHECK, NEW_CODEC, NEW_CHUNKS,
                                METRICS, FILL_MISSING_DATA_READS, STORE_DATA_EQUAL_TO_FILL_VALUE, USER, GROUP,
                                KERNEL)
DECLARED = Declared((*(o for o in OWN if o is not KERNEL), *VIEW_OPTIONS, *STORE_OPTIONS, KERNEL))
