"""Mount options: parsed once from `-o a,b=c` strings into one frozen dataclass."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import ZarrfsError
from .formats.creation import check_codec
from .store.settings import CHECK_SECONDS as CHECK_SECONDS  # (for the fuse layer too)
from .store.settings import OUTAGE_SECONDS as OUTAGE_SECONDS
from .store.settings import SourceSettings
from .views.registry import VIEW_KINDS


class OptionError(ZarrfsError, ValueError):
    """A mount option is unknown or has a bad value."""


STATS_XATTR = "user.zarrfs.stats"  # the root's attribute `zarrfs stats` reads (fuse and daemon)

# Accepted and dropped: mount(8) and systemd pass these; they mean nothing to the daemon.
_IGNORED = {"defaults", "auto", "noauto", "nofail", "_netdev", "user", "users", "nouser", "owner",
            "comment", "rw"}
_IGNORED_PREFIXES = ("x-systemd.", "x-", "comment=")
# Handed to the kernel through libfuse unchanged.
_KERNEL = {"nodev", "dev", "nosuid", "suid", "noexec", "exec", "noatime", "atime", "relatime",
           "norelatime", "sync", "async", "dirsync"}
_CREDENTIALS = {"key", "secret", "token", "password", "aws_access_key_id",
                "aws_secret_access_key", "aws_session_token", "account_key", "sas_token",
                "connection_string", "credential", "client_secret"}
_SIZE = re.compile(r"^(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?$", re.IGNORECASE)


@dataclass(frozen=True)
class MountOptions:
    read_only: bool = False
    # `-o rw` given (not only the default): a source that is never written (a zip) is refused.
    read_write: bool = False
    allow_other: bool = False
    default_permissions: bool = False
    uid: int | None = None
    gid: int | None = None
    umask: int = 0o022
    cache_bytes: int = 256 << 20
    byteorder: str = "little"
    debug: bool = False
    log_file: str | None = None
    readahead_kb: int | None = None  # (None: chosen from the array's chunks, daemon.kernel_window)
    direct_io: bool = False
    threads: int | None = None
    # Header files beside `data` for legacy tools, and the element order of `data`.
    views: frozenset[str] = VIEW_KINDS
    fortran_order: bool = False
    # Every group's data.nc as CDF-5, each variable as its own type (False: classic CDF-2,
    # unsigned and 64-bit variables served as classic types that hold their values, where
    # the dataset allows it).
    nc_cdf5: bool = False
    # data.h5 passes through as stored the chunks of codecs only readers with plugins decode
    # (HDF5 filters zstd, blosc, bzip2: h5py with hdf5plugin), and the TIFF views their zstd
    # tiles (GDAL, tifffile with imagecodecs); False: they are served decoded, so every HDF5
    # and TIFF reader opens the files (`filters=builtin|plugins`).
    plugin_filters: bool = False
    # The TIFF views in strips (rows of chunks), for readers that read no tiles (ImageJ 1.x);
    # False: in tiles, one a chunk (`tiff=tiles|strips`).
    tiff_strips: bool = False
    # Slabs decoded ahead of a sequential reader are pushed into the kernel's page cache from
    # threads of their own (zarrfs.fuse.pages); False: the reader's requests fetch every page.
    push_pages: bool = True
    # Close-to-open with other writers: check the store when a file is opened ("open", 0.0),
    # also every N seconds while it is open (N), or never (None).
    recheck: float | None = 0.0
    storage_options: Mapping[str, Any] = field(default_factory=dict)
    kernel_options: frozenset[str] = frozenset()
    # The longest a request waits on the store, retries included (None: 30 s for a remote
    # store, no bound for local files), and what a reference set or Icechunk source needs.
    timeout: float | None = None
    ref: str | None = None
    # Icechunk with -o rw: fsyncs within this many seconds share a commit (0: `each`).
    commit_seconds: float = 0.0
    fo: str | None = None
    references_allow: tuple[str, ...] = ()
    # Arrays made by writing NAME.npy into a group: their codec (`zstd`, `zstd:LEVEL`, `gzip`,
    # `blosc`, `none`) and chunk shape (None: about 1 MiB, `formats.creation.auto_chunks`).
    new_codec: str = "zstd"
    new_chunks: tuple[int, ...] | None = None
    # Where the daemon serves Prometheus metrics (host, port; port 0: any free port), or
    # None: no metrics (zarrfs.daemon.metrics).
    metrics: tuple[str, int] | None = None
    # TensorStore's zarr3 driver options, by its names and defaults: a read of a chunk that
    # is not stored gives the fill value (False: EIO), and a chunk written equal to the fill
    # value is deleted (True: stored).
    fill_missing_data_reads: bool = True
    store_data_equal_to_fill_value: bool = False
    # A persistent cache of what is read from a remote store, in this directory (shared by
    # mounts that name it), at most this many bytes (zarrfs.store.disk_cache).
    disk_cache: str | None = None
    disk_cache_size: int = 1 << 30
    # The user (and group) the daemon does its store I/O as once root has mounted
    # (zarrfs.daemon.privileges); None: the user that runs it.
    user: str | None = None
    group: str | None = None

    @classmethod
    def parse(cls, groups: Iterable[str]) -> MountOptions:
        """Parse `-o` arguments ("ro,cache=1G", ...); later options win."""
        values: dict[str, Any] = {}
        storage: dict[str, Any] = {}
        kernel: set[str] = set()
        for item in (part.strip() for group in groups for part in group.split(",")):
            if item:
                _apply(item, values, storage, kernel)
        if "endpoint_url" in storage:
            storage.setdefault("client_kwargs", {})["endpoint_url"] = storage.pop("endpoint_url")
        if "group" in values and "user" not in values:
            raise OptionError("option group= needs user= (the daemon would stay root)")
        return cls(**values, storage_options=storage, kernel_options=frozenset(kernel))

    @property
    def source(self) -> SourceSettings:
        """What the store layer needs to open the source."""
        return SourceSettings(timeout=self.timeout, ref=self.ref, fo=self.fo,
                              references_allow=self.references_allow, commit_seconds=self.commit_seconds)

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


def _apply(item: str, values: dict[str, Any], storage: dict[str, Any], kernel: set[str]) -> None:
    name, has_value, value = item.partition("=")
    if name in _CREDENTIALS:
        raise OptionError(f"option {name!r}: credentials are read from the environment or the "
                          "store's config files, never from mount options")
    if (name in _IGNORED and not has_value) or name.startswith(_IGNORED_PREFIXES):
        if name == "rw":
            values["read_only"], values["read_write"] = False, True
        return
    if name in _KERNEL and not has_value:
        kernel.add(name)
        return
    flags = {"ro": ("read_only", True), "allow_other": ("allow_other", True),
             "default_permissions": ("default_permissions", True), "debug": ("debug", True),
             "direct_io": ("direct_io", True)}
    if name in flags and not has_value:
        key, flag = flags[name]
        values[key] = flag
        if name == "ro":
            values["read_write"] = False
        return
    if name == "anon" and not has_value:
        storage["anon"] = True
        return
    if not has_value:
        raise OptionError(f"unknown option {name!r}")
    parsers: dict[str, tuple[str, Callable[[str], Any]]] = {
        "uid": ("uid", _parse_int), "gid": ("gid", _parse_int),
        "umask": ("umask", lambda v: int(v, 8)), "cache": ("cache_bytes", parse_size),
        "endian": ("byteorder", _parse_endian), "log": ("log_file", str),
        "readahead": ("readahead_kb", _parse_int), "threads": ("threads", _parse_positive),
        "views": ("views", _parse_views), "order": ("fortran_order", _parse_order),
        "recheck": ("recheck", _parse_recheck), "timeout": ("timeout", _parse_seconds),
        "ref": ("ref", _parse_name), "fo": ("fo", _parse_name), "commit": ("commit_seconds", _parse_commit),
        "references_allow": ("references_allow", _parse_prefixes),
        "new_codec": ("new_codec", check_codec), "new_chunks": ("new_chunks", _parse_chunks),
        "metrics": ("metrics", _parse_address), "nc_format": ("nc_cdf5", _parse_nc_format),
        "filters": ("plugin_filters", _parse_filters), "tiff": ("tiff_strips", _parse_tiff),
        "push_pages": ("push_pages", _parse_bool),
        "fill_missing_data_reads": ("fill_missing_data_reads", _parse_bool),
        "store_data_equal_to_fill_value": ("store_data_equal_to_fill_value", _parse_bool),
        "disk_cache": ("disk_cache", _parse_name), "disk_cache_size": ("disk_cache_size", parse_size),
        "user": ("user", _parse_name), "group": ("group", _parse_name),
    }
    if name in parsers:
        key, parse = parsers[name]
        try:
            values[key] = parse(value)
        except ValueError:
            raise OptionError(f"option {name}={value!r}: bad value") from None
        return
    if name in ("endpoint_url", "profile", "region", "anon", "account_name"):
        storage[name] = value.lower() in ("1", "true", "yes") if name == "anon" else value
        return
    raise OptionError(f"unknown option {name!r}")


def parse_size(text: str) -> int:
    """'256M', '1G', '1.5GiB', '4096' -> bytes."""
    match = _SIZE.match(text.strip())
    if not match:
        raise ValueError(text)
    number, unit = match.groups()
    scale = 1 << (10 * "kmgt".index(unit.lower()) + 10) if unit else 1
    return int(float(number) * scale)


def _parse_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError(text)
    return value


def _parse_positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


def _parse_seconds(text: str) -> float:
    seconds = float(text)
    if not 0 < seconds < 1e6:
        raise ValueError(text)
    return seconds


def _parse_name(text: str) -> str:
    if not text:
        raise ValueError(text)
    return text


def _parse_prefixes(text: str) -> tuple[str, ...]:
    """`PREFIX:PREFIX` (colon-separated: -o splits on commas). A URL's own colon stays with
    it: `s3://other/x:/data` is `s3://other/x` and `/data`."""
    parts = re.split(r":(?!//)", text)
    if not all(parts):
        raise ValueError(text)
    return tuple(parts)


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


def _parse_views(text: str) -> frozenset[str]:
    """`npy:nrrd` (colon-separated: -o itself splits on commas), or `none`."""
    if text == "none":
        return frozenset()
    names = frozenset(text.split(":"))
    if not names <= VIEW_KINDS:
        raise ValueError(text)
    return names


def _parse_recheck(text: str) -> float | None:
    """`open` (0), `never` (None), or seconds (> 0) between rechecks of open files."""
    if text in ("open", "never"):
        return 0.0 if text == "open" else None
    seconds = float(text)
    if not 0 < seconds < 1e9:
        raise ValueError(text)
    return seconds


def _parse_commit(text: str) -> float:
    """`each` (0: a commit per fsync) or the seconds within which fsyncs share one."""
    return 0.0 if text == "each" else _parse_seconds(text)


def _parse_bool(text: str) -> bool:
    """`true` or `false` (TensorStore's JSON words; 1, 0, yes, no too)."""
    words = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}
    if text.lower() not in words:
        raise ValueError(text)
    return words[text.lower()]


def _parse_nc_format(text: str) -> bool:
    """`auto` (classic where the dataset allows it) or `cdf5`: whether data.nc is CDF-5."""
    if text not in ("auto", "cdf5"):
        raise ValueError(text)
    return text == "cdf5"


def _parse_filters(text: str) -> bool:
    """`builtin` (chunks every HDF5 build, or TIFF reader, decodes pass through, others are decoded) or
    `plugins` (chunks of plugin filters pass through too): whether plugins are assumed."""
    if text not in ("builtin", "plugins"):
        raise ValueError(text)
    return text == "plugins"


def _parse_tiff(text: str) -> bool:
    """`tiles` (a tile a chunk) or `strips` (rows of chunks): whether the TIFF views hold strips."""
    if text not in ("tiles", "strips"):
        raise ValueError(text)
    return text == "strips"


def _parse_order(text: str) -> bool:
    if text not in ("C", "F"):
        raise ValueError(text)
    return text == "F"


def _parse_endian(text: str) -> str:
    if text not in ("little", "big"):
        raise ValueError(text)
    return text
