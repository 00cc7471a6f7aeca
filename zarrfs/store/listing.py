"""Finding the size and generation of many keys at once (`Store.stats`) without asking for
each: remotely one listing of each row of chunks that holds them (`row_prefix`), never of the
whole array (locally one scan of each directory that holds any of them: `local.scans`)."""

from __future__ import annotations

import re
from collections.abc import Sequence

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
