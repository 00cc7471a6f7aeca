"""Local directories read in one scan (`os.scandir` from a descriptor inside the root): the
size and generation of many keys (`scanned`, for `Store.stats`), every file below a directory
(`walk`, for `Store.list`) and the directories directly below one (`directories`)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence

from ...errors import RefusedKey
from .confined import Root, generation_of

FoundFile = tuple[int, str]  # a file the scan found: (size, generation), as `Store.stat` says


def scanned(root: str, keys: Sequence[str], confined: Root) -> dict[str, FoundFile]:
    """The size and generation of those of `keys` (below the local directory `root`) that
    are stored, from one scan of each directory holding any of them: no lookup of a key that
    is not there, and one stat (not a path walk) of each that is. Generations are
    `local.generation_of`'s, as `Store.stat` gives them (a link described as `confined`
    describes it: one leading outside by where it leads, nothing of its target)."""
    names_by_directory: dict[str, set[str]] = {}
    for key in keys:
        directory, _, name = key.rpartition("/")
        names_by_directory.setdefault(directory, set()).add(name)
    found: dict[str, FoundFile] = {}
    for directory, names in names_by_directory.items():
        try:
            # (opened, so each entry's stat is relative to it: no walk of the whole path)
            fd, _ = confined.open(os.path.join(root, directory), directory=True)
        except (FileNotFoundError, NotADirectoryError):
            continue  # (none of its keys is stored)
        except RefusedKey:  # (a link leading outside: its keys are there, and refused when read)
            found.update(_refused(confined, root, directory, names))
            continue
        try:
            _scan(fd, os.path.join(root, directory), f"{directory}/" if directory else "", names,
                  found, confined)
        finally:
            os.close(fd)
    return found


def _refused(confined: Root, root: str, directory: str, names: set[str]) -> dict[str, FoundFile]:
    prefix = f"{directory}/" if directory else ""
    return {prefix + name: confined.describe(os.path.join(root, directory, name)) for name in names}


def _scan(fd: int, path: str, prefix: str, names: set[str], found: dict[str, FoundFile],
          confined: Root) -> None:
    with os.scandir(fd) as entries:
        for entry in entries:
            if entry.name in names:
                with contextlib.suppress(FileNotFoundError):  # (deleted since the scan: not stored)
                    found[prefix + entry.name] = _described(entry, path, confined)


def _described(entry: os.DirEntry[str], path: str, confined: Root) -> FoundFile:
    if entry.is_symlink():  # (free: the scan's d_type) followed as an open would follow it
        return confined.describe(os.path.join(path, entry.name))
    status = entry.stat()
    return status.st_size, generation_of(status)


def walk(confined: Root, base: str) -> list[str]:
    """The paths of the files below the local directory `base` (none when it is none), as
    zarr-python's local store lists them: links to files included, links to directories not
    descended into (so a listing never leaves the store's root). A file at `base` is listed
    alone, as fsspec's `find` lists it."""
    try:
        fd, _ = confined.open(base, directory=True)
    except FileNotFoundError:
        return []
    except NotADirectoryError:
        return [base] if os.path.lexists(base) else []
    try:
        return list(_files(fd, base))
    finally:
        os.close(fd)


def _files(fd: int, base: str) -> Iterator[str]:
    for directory, _, files, _ in os.fwalk(".", dir_fd=fd):
        below = base if directory == "." else os.path.join(base, directory[2:])
        yield from (os.path.join(below, name) for name in files)


def directories(confined: Root, base: str) -> tuple[str, ...]:
    """The names of the directories directly below `base`, sorted: links to directories among
    them only where they stay inside the store (`confined`)."""
    fd, _ = confined.open(base, directory=True)
    try:
        with os.scandir(fd) as entries:
            return tuple(sorted(e.name for e in entries if e.is_dir() and (
                not e.is_symlink() or confined.follows(os.path.join(base, e.name)))))
    finally:
        os.close(fd)
