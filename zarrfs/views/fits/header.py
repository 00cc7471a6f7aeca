"""The primary header of `data.fits` (FITS 4.0): the array's element type as BITPIX, its shape
as NAXISn (NAXIS1 the file's fastest axis: the array's last, or its first in Fortran order),
BZERO where FITS keeps the type as its signed or unsigned twin, the WCS where the array's
coordinates give it (`wcs`) and its attributes as keywords (`keywords`). Pure: a dtype, a
shape and a `Placement` in, bytes out."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..files import CannotHold
from ..placement import Placement
from .cards import header_bytes, keyword_card, one_card
from .keywords import UNITS_ATTRIBUTE, attribute_cards
from .wcs import world_cards

__all__ = ["MAX_AXES", "fits_header", "stored_as_twin"]

MAX_AXES = 999
# (kind, bytes) -> (BITPIX, BZERO). FITS has unsigned bytes and signed wider integers: the other
# sign's are stored as their twin, value - BZERO, which flips their top bit.
_IMAGE_TYPES: dict[tuple[str, int], tuple[int, int | None]] = {
    ("u", 1): (8, None), ("i", 1): (8, -(2**7)), ("i", 2): (16, None), ("u", 2): (16, 2**15),
    ("i", 4): (32, None), ("u", 4): (32, 2**31), ("i", 8): (64, None), ("u", 8): (64, 2**63),
    ("f", 4): (-32, None), ("f", 8): (-64, None),
}


def fits_header(dtype: np.dtype[Any], shape: tuple[int, ...], fortran: bool,
                placement: Callable[[], Placement]) -> bytes:
    """The header of the file of an array of `shape`, in Fortran order or C; CannotHold where
    FITS cannot hold the array."""
    found = _IMAGE_TYPES.get((dtype.kind, dtype.itemsize))
    if found is None:
        raise CannotHold(f"FITS images hold no {dtype.name} elements (only integers of 8 to 64 bits "
                         "and floats of 32 and 64)")
    if not shape or len(shape) > MAX_AXES:
        raise CannotHold(f"FITS images have 1 to {MAX_AXES} axes, not {len(shape)}")
    bitpix, bzero = found
    cards = [*keyword_card("SIMPLE", True, "conforms to the FITS standard"), *keyword_card("BITPIX", bitpix),
             *keyword_card("NAXIS", len(shape))]
    for number, length in enumerate(shape if fortran else reversed(shape), start=1):
        cards += keyword_card(f"NAXIS{number}", length)
    if bzero is not None:
        cards += [*keyword_card("BZERO", bzero, "stored: value - BZERO"), *keyword_card("BSCALE", 1)]
    where = placement()
    attributes = where.surroundings.attributes if where.surroundings is not None else {}
    units = attributes.get(UNITS_ATTRIBUTE)
    if isinstance(units, str) and one_card(units):
        cards += keyword_card("BUNIT", units)
    cards += world_cards(where, shape, fortran)
    cards += attribute_cards(attributes)
    return header_bytes(cards)


def stored_as_twin(dtype: np.dtype[Any]) -> bool:
    """Whether FITS stores elements of `dtype` as their twin of the other sign (BZERO)."""
    found = _IMAGE_TYPES.get((dtype.kind, dtype.itemsize))
    return found is not None and found[1] is not None
