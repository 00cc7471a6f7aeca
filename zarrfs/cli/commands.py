"""What the `zarrfs` commands do, as functions: the command line (`cli`) parses arguments,
calls these and prints what they return. It knows no format, codec or store of its own:
everything it needs of them is here.

Heavy or optional imports (the daemon's pyfuse3 and trio, the checker, the importer) happen
in the function that needs them, so `zarrfs info` starts fast.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from contextlib import closing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..api import read_stats
from ..array_metadata import NEW_FORMAT, create_array, open_array
from ..errors import ZarrfsError, missing_package
from ..formats import CORE_TYPES, ArrayDescription, auto_chunks, described_v3_array
from ..options import MountOptions, TreeOptions
from ..store import open_store
from .info import describe, describe_tree, dims

if TYPE_CHECKING:
    from .check import Report

__all__ = ["DATA_TYPE_NAMES", "NewArray", "check", "create", "dims", "import_raw", "info",
           "install_system", "mount", "new_array_metadata", "resize", "serve", "stats"]

DATA_TYPE_NAMES = tuple(sorted(CORE_TYPES))  # the data types `create` and `import` offer


@dataclass(frozen=True)
class NewArray:
    """An array to make, as the user described it (`--shape`, `--dtype`, ...)."""

    shape: tuple[int, ...]
    dtype: str
    chunks: tuple[int, ...] | None = None  # None: about 1 MiB
    shards: tuple[int, ...] | None = None
    codec: str = "zstd:3"
    fill_value: str = "0"
    dimension_names: Sequence[str] | None = None
    key_separator: str = "/"


def mount(source: str, mountpoint: str, options: MountOptions, *, foreground: bool) -> int:
    from ..daemon.run import mount as run_daemon  # imports pyfuse3 and trio: only for this command

    return run_daemon(source, mountpoint, options, foreground=foreground)


def serve(source: str, listen: str, options: TreeOptions, *, users_file: str | None = None,
          token_file: str | None = None, certificate: str | None = None, key: str | None = None,
          allow_hosts: Sequence[str] = (), allow_origins: Sequence[str] = (), allow_plain_http: bool = False,
          client_timeout: int = 30) -> int:
    """`zarrfs serve`: the tree over WebDAV and HTTP until stopped (no FUSE needed)."""
    try:
        from ..daemon.serving import serve as run_server  # (WsgiDAV and cheroot: zarrfs[serve])
        from ..serve import Access, parse_listen
    except ImportError as e:
        raise ZarrfsError(missing_package(e) or f"zarrfs serve: {e}") from None
    host, port = parse_listen(listen)
    access = Access.given(host, users_file=users_file, token_file=token_file, certificate=certificate,
                          key=key, allow_hosts=allow_hosts, allow_origins=allow_origins,
                          allow_plain_http=allow_plain_http)
    return run_server(_absolute(source), host, port, access, options, client_timeout=client_timeout)


def _absolute(source: str) -> str:
    return source if "://" in source or "::" in source else os.path.abspath(source)


def info(source: str, options: TreeOptions) -> list[str]:
    """The tree of the group at `source`, a line a node; or the array's rows ("name: value")."""
    with closing(open_store(source, options.source, read_only=True)) as store:
        tree = describe_tree(store)
        if tree is not None:
            return tree
        array = open_array(store)
        try:
            return [f"{name + ':':<19} {value}" for name, value in describe(array)]
        finally:
            array.close()


def new_array_metadata(new: NewArray) -> ArrayDescription:
    """The description of the array `new` asks for (ZarrfsError: it asks for something wrong)."""
    chunks = new.chunks
    if chunks is None:
        if new.shards:
            raise ZarrfsError("--shards needs --chunks")
        chunks = auto_chunks(new.shape, CORE_TYPES[new.dtype].itemsize)
    for name, shape in (("--chunks", chunks), ("--shards", new.shards)):
        if shape is not None and len(shape) != len(new.shape):
            raise ZarrfsError(f"{name} needs {len(new.shape)} numbers, like --shape")
    return described_v3_array(new.shape, new.dtype, chunks, shards=new.shards, codec=new.codec,
                              fill_value=new.fill_value, dimension_names=new.dimension_names,
                              key_separator=new.key_separator)


def create(source: str, options: TreeOptions, new: NewArray) -> ArrayDescription:
    """A new, empty array at `source` (refused where an array or group is)."""
    metadata = new_array_metadata(new)
    with closing(open_store(source, options.source)) as store:
        name = NEW_FORMAT.metadata_file
        if store.size(name) is not None:
            raise ZarrfsError(f"{source} already holds an array or group ({name} exists)")
        create_array(store, metadata).close()
    return metadata


def check(source: str, options: TreeOptions, *, jobs: int | None) -> Report:
    from .check import check as check_store

    with closing(open_store(source, options.source, read_only=True)) as store:
        return check_store(store, jobs=jobs)


def import_raw(raw: str, dest: str, options: TreeOptions, new: NewArray, *, order: str, endian: str,
               jobs: int | None) -> tuple[ArrayDescription, int]:
    """A new array at `dest` holding the elements of the file `raw` ("-": standard input);
    its description and the number of chunks stored."""
    from .importer import import_raw as import_file

    metadata = new_array_metadata(new)
    stored = import_file(raw, dest, options.source, metadata, order=order, endian=endian, jobs=jobs)
    return metadata, stored


def resize(source: str, options: TreeOptions, shape: tuple[int, ...], *, force: bool = False) -> list[str]:
    """Resize the array at `source` (not mounted, unless `force`); the groups whose
    consolidated metadata were updated too."""
    from .resize import resize_offline

    return resize_offline(source, options.source, shape, force=force)


def stats(mountpoint: str) -> dict[str, Any]:
    """The counters of the zarrfs mounted at `mountpoint`, first the user its daemon does its
    store I/O as (`-o user=`), by name."""
    counters = read_stats(mountpoint)
    if "uid" not in counters:
        return counters
    from ..daemon.privileges import user_name

    ids: dict[str, int] = {name: int(counters[name]) for name in ("uid", "gid") if name in counters}
    return {"user": user_name(ids["uid"]), **counters, **ids}


def install_system(prefix: str) -> list[str]:
    """Link PREFIX/sbin/mount.zarrfs to this installation's and write the systemd units naming
    its `zarrfs` below `prefix`; a line for each thing done."""
    from pathlib import Path

    from .install_system import install_system as install

    return install(Path(prefix))
