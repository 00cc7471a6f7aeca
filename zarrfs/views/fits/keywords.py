"""The array's attributes as keywords of `data.fits`, where FITS can hold them.

- A name that is a keyword once upper-cased (up to 8 letters, digits, `-`, `_`) is that
  keyword; any other printable name without `=` is an ESO HIERARCH card (`HIERARCH long_name =
  'air temperature'`), which astropy, CFITSIO and DS9 read. Names of keywords the standard or
  the WCS gives a meaning and a value (BITPIX, BZERO, CTYPE1, PC1_2, DATE-OBS, ...) are left
  out, whatever their case: a reader would take them for the image's own; of those it keeps
  for text (OBJECT, TELESCOP, ...), those whose attribute is not text.
- Values: booleans (T/F), integers CFITSIO reads (64-bit), finite reals, strings of printable
  ASCII; a list of one of them as that one. A string longer than a card is continued on
  CONTINUE cards (with LONGSTRN, the convention's flag) under a keyword, and left out under a
  HIERARCH name (CFITSIO continues none). Anything else (lists, objects, NaN, text that is not
  ASCII) is left out: FITS has no such value, and a rendering of it would be a guess.
- CF's `units` is BUNIT, the unit of the image's values; `history` and `comment` are HISTORY
  and COMMENT cards, a card a line.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from typing import Any

from .cards import Value, commentary, hierarch, is_keyword, keyword_card, printable

__all__ = ["attribute_cards"]

# Keywords whose meaning and value the standard, its conventions or the WCS fix (whatever
# data.fits writes of them): FITS readers take them for the image's own, fitsverify checks them.
_RESERVED = frozenset((
    "SIMPLE", "BITPIX", "NAXIS", "EXTEND", "END", "XTENSION", "PCOUNT", "GCOUNT", "GROUPS", "BLOCKED",
    "BZERO", "BSCALE", "BLANK", "BUNIT", "DATAMIN", "DATAMAX", "CONTINUE", "COMMENT", "HISTORY", "LONGSTRN",
    "HIERARCH", "CHECKSUM", "DATASUM", "INHERIT", "EXTNAME", "EXTVER", "EXTLEVEL", "TFIELDS", "THEAP",
    "WCSAXES", "WCSNAME", "LONPOLE", "LATPOLE", "RADESYS", "RADECSYS", "EQUINOX", "EPOCH", "SPECSYS",
    "SSYSOBS", "SSYSSRC", "VELREF", "VELOSYS", "VELANGL", "ZSOURCE", "RESTFRQ", "RESTFREQ", "RESTWAV",
    "MJDREF", "MJDREFI", "MJDREFF", "TIMESYS", "TIMEUNIT"))
_RESERVED_FORMS = re.compile(
    r"(NAXIS|CTYPE|CRVAL|CDELT|CRPIX|CUNIT|CNAME|CROTA|CRDER|CSYER|PTYPE|PSCAL|PZERO|TTYPE|TFORM|TUNIT|TNULL"
    r"|TSCAL|TZERO|TDISP|TDIM|TBCOL|TCTYP|TCUNI|TCRPX|TCRVL|TCDLT|TCROT)\d+[A-Z]?"
    r"|(PC|CD|PV|PS)\d+_\d+[A-Z]?|DATE(-.*)?|MJD-.*|OBSGEO-[XYZ]")
# Keywords the standard keeps for text: held only when the attribute is a string.
_TEXT = frozenset(("AUTHOR", "CREATOR", "INSTRUME", "OBJECT", "OBSERVER", "ORIGIN", "REFERENC", "TELESCOP"))
_COMMENTARY = {"history": "HISTORY", "comment": "COMMENT"}
UNITS_ATTRIBUTE = "units"  # (BUNIT: the header writes it)
_LARGEST_INTEGER = 2**63


def attribute_cards(attributes: Mapping[str, Any]) -> list[str]:
    """The cards of the attributes FITS holds, in the attributes' order."""
    cards: list[str] = []
    taken: set[str] = set()
    continued = False
    for name, value, text in _held(attributes):
        if name in _COMMENTARY:
            cards += commentary(_COMMENTARY[name], text)
            continue
        keyword = name.upper()
        if keyword in taken or reserved(keyword) or (keyword in _TEXT and not isinstance(value, str)):
            continue
        taken.add(keyword)
        if is_keyword(keyword):
            made = keyword_card(keyword, value)
            continued = continued or len(made) > 1
            cards += made
        elif (card := hierarch(name, value)) is not None:
            cards.append(card)
    return [*keyword_card("LONGSTRN", "OGIP 1.0", "CONTINUE cards continue long strings"), *cards] \
        if continued else cards


def reserved(keyword: str) -> bool:
    return keyword in _RESERVED or _RESERVED_FORMS.fullmatch(keyword) is not None


def _held(attributes: Mapping[str, Any]) -> Iterator[tuple[str, Value, str]]:
    """(name, value, the value as text) of each attribute whose value FITS holds (the text of
    HISTORY and COMMENT may have lines)."""
    for name, value in attributes.items():
        if name == UNITS_ATTRIBUTE:
            continue
        lines = name in _COMMENTARY and isinstance(value, str)
        found = _value(value.replace("\n", " ") if lines else value)
        if found is not None:
            yield name, found, value if lines else str(found)


def _value(value: object) -> Value | None:
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if -_LARGEST_INTEGER <= value < _LARGEST_INTEGER else None
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        return value if printable(value) else None
    return None
