"""Options declared where they act. Each view family, each store driver family and the mount
itself declares its `-o` options as `Option`s: name, type, default, a line of help and the
values it accepts, as rclone's backends register theirs (`fs.RegInfo{Options: ...}`) and
GDAL's drivers declare their open options. `zarrfs.options` composes the declarations into
the mount's options and parses `-o` once, into `OptionValues`; a family reads its own option
there by the declaration itself (`values[ITS_OPTION]`), and everything between carries the values
without naming any (`zarrfs options` and docs/usage.md's table are made from the same list).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from .errors import ZarrfsError

T = TypeVar("T")

# The types an option's value may have, as GDAL names an open option's: how its values read.
TYPES = frozenset({"flag", "words", "choice", "boolean", "integer", "octal", "size", "seconds", "text",
                   "list", "address"})


class OptionError(ZarrfsError, ValueError):
    """A mount option is unknown or has a bad value."""


# (the name it was documented and raised under before the options were declared here, which
# `zarrfs.options` still hands on: what a traceback and a pickle say of it)
OptionError.__module__ = "zarrfs.options"


@dataclass(frozen=True, eq=False)
class Option(Generic[T]):
    """One `-o` option, as the code it acts in declares it. Its declaration is its key: two
    options of one name are two declarations, which the composition refuses."""

    name: str
    type: str  # (one of TYPES)
    default: T
    help: str  # one line (Markdown: docs/usage.md shows it as it is)
    # What may follow `name=`: its words, or a PLACEHOLDER of its value (as the help names it).
    accepts: tuple[str, ...] = ()
    # The value of the text after `name=` (ValueError: a bad one); None: it takes none.
    parse: Callable[[str], T] | None = None
    # Words given alone, each the value it stands for (`ro`, `rw`; `anon`).
    words: Mapping[str, T] = field(default_factory=dict)
    # How a value given again joins the one before (the kernel's flags gather); None: it wins.
    join: Callable[[T, T], T] | None = None
    # Meaningless to `zarrfs serve`, which has no kernel mount (the kernel's, FUSE's options).
    mount_only: bool = False
    # How the help shows it, where not as its words and `name=` values (`user=NAME,group=GROUP`).
    shown: tuple[str, ...] = ()

    @property
    def forms(self) -> tuple[str, ...]:
        """The option as a user writes it, one form a way."""
        return self.shown or (*self.words, *(f"{self.name}={value}" for value in self.accepts))


def flag(name: str, help: str, *, mount_only: bool = False) -> Option[bool]:
    """An option given alone, or not given."""
    return Option(name, "flag", False, help, words={name: True}, mount_only=mount_only)


def choice(name: str, values: Mapping[str, T], default: str, help: str, *,
           mount_only: bool = False) -> Option[T]:
    """`name=WORD`: one of the words of `values`, each the value it stands for."""

    def parse(text: str) -> T:
        if text not in values:
            raise ValueError(text)
        return values[text]

    return Option(name, "choice", values[default], help, tuple(values), parse, mount_only=mount_only)


def boolean(name: str, default: bool, help: str, *, mount_only: bool = False) -> Option[bool]:
    """`name=true` / `name=false` (the default first)."""
    words = ("true", "false") if default else ("false", "true")
    return Option(name, "boolean", default, help, words, parse_boolean, mount_only=mount_only)


def valued(name: str, type: str, placeholder: str, parse: Callable[[str], T], default: T, help: str, *,
           mount_only: bool = False, shown: tuple[str, ...] = ()) -> Option[T]:
    """`name=VALUE`, `parse` reading the value."""
    return Option(name, type, default, help, (placeholder,), parse, mount_only=mount_only, shown=shown)


class OptionValues:
    """The options given, each read by the code that declared it: `values[OPTION]` is its
    value, or its default where it was not given. Two are equal when every option reads the
    same in both."""

    def __init__(self, given: Mapping[Option[Any], Any] | None = None) -> None:
        self._given: dict[Option[Any], Any] = dict(given or {})

    def __getitem__(self, option: Option[T]) -> T:
        value: T = self._given.get(option, option.default)
        return value

    def replaced(self, option: Option[T], value: T) -> OptionValues:
        """These values but `option`'s, which reads `value` (as if given)."""
        return OptionValues({**self._given, option: value})

    def __contains__(self, option: Option[Any]) -> bool:
        """Whether `option` was given (not only defaulted)."""
        return option in self._given

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, OptionValues):
            return NotImplemented
        return all(self[option] == other[option] for option in self._given.keys() | other._given.keys())

    __hash__ = None  # type: ignore[assignment]  # (mutable-looking: equal by what they read)

    def __repr__(self) -> str:
        return f"OptionValues({', '.join(f'{o.name}={v!r}' for o, v in self._given.items())})"

    @classmethod
    def parsed(cls, declared: Iterable[Option[Any]], items: Iterable[str]) -> OptionValues:
        """`items` ("name", "name=value"; later ones win) read as `declared` says (OptionError:
        one is unknown, or a value is bad)."""
        table = Declared(declared)
        given: dict[Option[Any], Any] = {}
        for item in items:
            option, value = table.read(item)
            before = given.get(option, option.default)
            given[option] = value if option.join is None else option.join(before, value)
        return cls(given)


class Declared:
    """Options by what names them: their names (`name=value`) and their words."""

    def __init__(self, options: Iterable[Option[Any]]) -> None:
        self.options: tuple[Option[Any], ...] = tuple(dict.fromkeys(options))  # (in order, once each)
        self._named: dict[str, Option[Any]] = {}
        self._words: dict[str, Option[Any]] = {}
        for option in self.options:
            for table, names in ((self._named, [option.name] if option.parse else []),
                                 (self._words, list(option.words))):
                for name in names:
                    if name in table:
                        raise ValueError(f"option {name!r} is declared twice")
                    table[name] = option

    def __iter__(self) -> Iterator[Option[Any]]:
        return iter(self.options)

    def named(self, name: str) -> Option[Any] | None:
        """The option `name` names (`name=value`) or is a word of (`ro`, `rw`); None: no option."""
        return self._named.get(name) or self._words.get(name)

    def read(self, item: str) -> tuple[Option[Any], Any]:
        """The option `item` gives and its value."""
        name, has_value, value = item.partition("=")
        if not has_value and name in self._words:
            option = self._words[name]
            return option, option.words[name]
        named = self._named.get(name) if has_value else None
        if named is None or named.parse is None:
            raise OptionError(f"unknown option {name!r}")
        try:
            return named, named.parse(value)
        except ValueError:
            raise OptionError(f"option {name}={value!r}: bad value") from None


# -- values of the common types ------------------------------------------------------------------

_SIZE = re.compile(r"^(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?$", re.IGNORECASE)
_BOOLEANS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


def parse_size(text: str) -> int:
    """'256M', '1G', '1.5GiB', '4096' -> bytes."""
    match = _SIZE.match(text.strip())
    if not match:
        raise ValueError(text)
    number, unit = match.groups()
    scale = 1 << (10 * "kmgt".index(unit.lower()) + 10) if unit else 1
    return int(float(number) * scale)


def parse_count(text: str) -> int:
    """An integer, 0 or more."""
    value = int(text)
    if value < 0:
        raise ValueError(text)
    return value


def parse_positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


def parse_seconds(text: str) -> float:
    seconds = float(text)
    if not 0 < seconds < 1e6:
        raise ValueError(text)
    return seconds


def parse_name(text: str) -> str:
    """Any text but none."""
    if not text:
        raise ValueError(text)
    return text


def parse_boolean(text: str) -> bool:
    """`true` or `false` (TensorStore's JSON words; 1, 0, yes, no too)."""
    if text.lower() not in _BOOLEANS:
        raise ValueError(text)
    return _BOOLEANS[text.lower()]
