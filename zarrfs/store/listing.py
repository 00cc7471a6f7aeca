"""Finding the size and generation of many keys at once (`Store.stats`) without asking for
each: locally one scan of each directory that holds any of them, remotely one listing of each
row of chunks that holds them (`row_prefix`), never of the whole array."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator, Sequence

from ..errors import RefusedKey
from .local import Root, generation_of

Described = tuple[int, str]  # (size, generation), as `Store.stat` says
ONE_LISTING = 990  # objects of an array's grid one listing answers for (a page: 1,000 keys)
BLOCK = "*"  # (marks the block of a 1-D array's chunk: `checked_with`)


def row_prefix(key: str) -> tuple[str, str]:
    """A chunk key's directory and its name's prefix up to the last separator: where the
    chunks of its row of the grid are ("c/5/7": ("c/5", ""); "c.5.7": ("", "c.5."))."""
    directory, _, name = key.rpartition("/")
    return directory, name[: name.rfind(".") + 1]


def first_chunk(entries: Sequence[tuple[str, str]]) -> str | None:
    """The first of the cached `entries` that is a chunk (its key ends in a grid index; the
    names of metadata end in letters)."""
    return next((path for path, _ in entries if path[-1:].isdigit()), None)


def row_of(path: str) -> str:
    """The prefix of the keys of `path`'s row of chunks ("a/c/5/7": "a/c/5/")."""
    directory, names = row_prefix(path)
    return f"{directory}/{names}" if directory else names


def numbered_row(row: str) -> bool:
    """Whether `row` is a row of a grid ("a/c/5/"), not every chunk of a 1-D array ("a/c/")."""
    return len(rows_from(row, 2)) > 1


def rows_from(prefix: str, count: int) -> list[str]:
    """`prefix`, a row of chunks ("a/c/5/", "a/c.5."), and the `count - 1` rows after it
    (just `prefix` when it has no number: the chunks of a 1-D array)."""
    found = re.fullmatch(r"(.*?)(\d+)([/.])", prefix, re.DOTALL)
    if found is None:
        return [prefix]
    head, number, separator = found.groups()
    return [f"{head}{int(number) + i}{separator}" for i in range(count)]


def checked_with(path: str, root: str, holds: int | None) -> str:
    """What one listing checks the object `path` of the array at `root` with (`holds`: the
    objects its grid may hold, where known): the whole array ("a/"), when a listing's page
    holds its grid; its row of chunks ("a/c/5/"); a chunk of a larger 1-D array (no rows),
    its block ("a/c/12345": "a/c/123*": the keys that begin as its key does but for the
    last two digits, chunks 12300-12399, 123 and 1230-1239), where its number is as long as
    the array's last chunk's (most are); else `path` alone."""
    if holds is not None and holds <= ONE_LISTING and path.startswith(f"{root}/"):
        return f"{root}/"
    row = row_of(path)
    if numbered_row(row):
        return row
    name = path[len(row) :]
    digits = len(str(max((holds or 0) - 1, 0)))
    if digits < 3 or len(name) != digits or not name.isdigit():
        return path
    return f"{path[:-2]}{BLOCK}"


def scanned(root: str, keys: Sequence[str], confined: Root) -> dict[str, Described]:
    """The size and generation of those of `keys` (below the local directory `root`) that
    are stored, from one scan of each directory holding any of them: no lookup of a key that
    is not there, and one stat (not a path walk) of each that is. Generations are
    `local.generation_of`'s, as `Store.stat` gives them (a link described as `confined`
    describes it: one leading outside by where it leads, nothing of its target)."""
    names_by_directory: dict[str, set[str]] = {}
    for key in keys:
        directory, _, name = key.rpartition("/")
        names_by_directory.setdefault(directory, set()).add(name)
    found: dict[str, Described] = {}
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


def _refused(confined: Root, root: str, directory: str, names: set[str]) -> dict[str, Described]:
    prefix = f"{directory}/" if directory else ""
    return {prefix + name: confined.describe(os.path.join(root, directory, name)) for name in names}


def _scan(fd: int, path: str, prefix: str, names: set[str], found: dict[str, Described],
          confined: Root) -> None:
    with os.scandir(fd) as entries:
        for entry in entries:
            if entry.name in names:
                with contextlib.suppress(FileNotFoundError):  # (deleted since the scan: not stored)
                    found[prefix + entry.name] = _described(entry, path, confined)


def _described(entry: os.DirEntry[str], path: str, confined: Root) -> Described:
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
