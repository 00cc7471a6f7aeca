"""The card rules of FITS headers (FITS 4.0, section 4), in one place: 80-character cards of
printable ASCII, a keyword of up to 8 characters, a value in fixed format where it fits
(right-justified to column 30), strings in quotes and longer ones continued on CONTINUE cards,
ESO's HIERARCH cards for longer names, and the header padded with blanks to whole blocks of
2880 bytes after END. Pure: values in, text out."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

__all__ = ["BLOCK", "CARD", "Value", "commentary", "header_bytes", "hierarch", "is_keyword", "keyword_card",
           "one_card", "padding", "printable"]

BLOCK = 2880
CARD = 80
Value = bool | int | float | str

_KEYWORD = re.compile(r"[A-Z0-9_-]{1,8}")
_PRINTABLE = re.compile(r"[\x20-\x7e]*")
_FIXED_WIDTH = 20  # (a fixed-format value ends in column 30)
_STRING_ROOM = CARD - 10 - 2  # (between the quotes of a card's value, from column 11)
_COMMENTARY_ROOM = CARD - 8


def is_keyword(name: str) -> bool:
    """Whether `name` is a keyword as it is (upper case, digits, hyphen, underscore)."""
    return _KEYWORD.fullmatch(name) is not None


def printable(text: str) -> bool:
    return _PRINTABLE.fullmatch(text) is not None


def one_card(text: str) -> bool:
    """Whether `text` is a string value of one card (no CONTINUE)."""
    return printable(text) and len(text.replace("'", "''")) <= _STRING_ROOM


def keyword_card(keyword: str, value: Value, comment: str = "") -> list[str]:
    """The card of `keyword = value` (a long string: its first card and its CONTINUE cards)."""
    if isinstance(value, str):
        return _string_cards(keyword, value)
    return [_with_comment(f"{keyword:<8}= {_number(value):>{_FIXED_WIDTH}}", comment)]


def hierarch(name: str, value: Value) -> str | None:
    """ESO's HIERARCH card of a name no keyword holds; None when it is more than one card
    (CFITSIO continues no HIERARCH string) or the name holds an `=`."""
    if "=" in name or not printable(name):
        return None
    text = _quoted(value) if isinstance(value, str) else _number(value)
    card = f"HIERARCH {name} = {text}"
    return card if len(card) <= CARD else None


def commentary(keyword: str, text: str) -> list[str]:
    """COMMENT or HISTORY cards of `text`, a card a line, long lines cut into cards."""
    cards = []
    for line in text.splitlines() or [""]:
        cards += [f"{keyword:<8}{line[i:i + _COMMENTARY_ROOM]}"
                  for i in range(0, max(len(line), 1), _COMMENTARY_ROOM)]
    return cards


def header_bytes(cards: Iterable[str]) -> bytes:
    """The header: the cards, END, blanks up to a whole number of blocks."""
    text = "".join(f"{card:<{CARD}}" for card in [*cards, "END"])
    return (text + " " * padding(len(text))).encode("ascii")


def padding(size: int) -> int:
    """The bytes that fill `size` up to a whole number of blocks."""
    return -size % BLOCK


def _number(value: bool | int | float) -> str:
    if isinstance(value, bool):
        return "T" if value else "F"
    if isinstance(value, int):
        return str(value)
    if not math.isfinite(value):
        raise ValueError(f"FITS has no real value {value}")
    text = repr(float(value)).upper()
    significand, _, exponent = text.partition("E")
    if "." not in significand:
        significand += ".0"
    return f"{significand}E{exponent}" if exponent else significand


def _quoted(text: str) -> str:
    """A string value: quotes doubled, at least 8 characters between the quotes."""
    return "'" + f"{text.replace(chr(39), chr(39) * 2):<8}" + "'"


def _string_cards(keyword: str, text: str) -> list[str]:
    """One card, or the CONTINUE convention's: every piece but the last ends in `&` (a
    doubled quote is never split)."""
    if len(text.replace("'", "''")) <= _STRING_ROOM:
        return [f"{keyword:<8}= {_quoted(text)}"]
    pieces, piece = [], ""
    for char in text:
        if len((piece + char).replace("'", "''")) > _STRING_ROOM - 1:
            pieces.append(piece)
            piece = ""
        piece += char
    cards = [f"{keyword:<8}= {_quoted(pieces[0] + '&')}"]
    cards += [f"CONTINUE  {_quoted(p + '&')}" for p in pieces[1:]]
    return [*cards, f"CONTINUE  {_quoted(piece)}"]


def _with_comment(card: str, comment: str) -> str:
    return f"{card} / {comment}"[:CARD] if comment else card
