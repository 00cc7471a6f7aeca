"""The help of the mount's options, made from their declarations (`zarrfs.options.DECLARED`,
each declared where it acts): `zarrfs options` (each option, its type and its help), the list
under `zarrfs mount --help` and `zarrfs serve --help`, and the table of docs/usage.md
(`zarrfs options --markdown`, which a test holds the docs equal to)."""

from __future__ import annotations

import re
import shutil
import textwrap
from collections.abc import Iterable, Sequence
from typing import Any

from ..declared import Option, OptionError
from ..options import DECLARED

_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")


def markdown_table(options: Iterable[Option[Any]] = DECLARED) -> str:
    """The options as docs/usage.md's table: each option's forms, and its help."""
    rows = [f"| {' / '.join(f'`{form}`' for form in option.forms)} | {option.help} |" for option in options]
    return "\n".join(["| Option | Meaning |", "|---|---|", *rows])


def described(names: Sequence[str] = (), options: Iterable[Option[Any]] = DECLARED) -> list[str]:
    """The lines of `zarrfs options`: the options named (by name or by a word of theirs; all
    when none is), each its forms, its type, and its help (OptionError: one is unknown)."""
    chosen = [_named(name, options) for name in names] if names else list(options)
    width = max(60, min(100, shutil.get_terminal_size((100, 24)).columns - 2))
    lines = []
    for option in chosen:
        kind = option.type + ("; mount only: `zarrfs serve` ignores it" if option.mount_only else "")
        lines.append(f"{', '.join(option.forms)}  ({kind})")
        lines += textwrap.wrap(_LINK.sub(r"\1", option.help), width, initial_indent="    ",
                               subsequent_indent="    ")
    return lines


def synopsis(*, serving: bool = False, options: Iterable[Option[Any]] = DECLARED) -> str:
    """The options in a paragraph, for `zarrfs mount --help` (`serving`: those `zarrfs serve`
    takes)."""
    shown = ", ".join(_short(option) for option in options if not (serving and option.mount_only))
    width = max(60, min(100, shutil.get_terminal_size((100, 24)).columns - 2))
    head = ("options (-o, comma-separated; later ones win; `zarrfs options [NAME]` says what each "
            "does):")
    return "\n".join([*textwrap.wrap(head, width), *textwrap.wrap(shown, width, initial_indent="  ",
                                                                   subsequent_indent="  ",
                                                                   break_on_hyphens=False)])


def _short(option: Option[Any]) -> str:
    """`ro|rw`, `cache=SIZE`, `tiff=tiles|strips`."""
    values = [f"{option.name}={'|'.join(option.accepts)}"] if option.accepts else []
    return "|".join((*option.words, *values))


def _named(name: str, options: Iterable[Option[Any]]) -> Option[Any]:
    for option in options:
        if name == option.name or name in option.words or name.partition("=")[0] == option.name:
            return option
    raise OptionError(f"unknown option {name!r} (`zarrfs options` lists them)")
