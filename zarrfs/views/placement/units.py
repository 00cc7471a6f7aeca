"""The units OME-Zarr names an axis's spacing in (UDUNITS-2 names, as its `axes` list them),
as multiples of the metre and the second, for the headers whose formats have units of their
own (each family converts to its format's units from these)."""

from __future__ import annotations

__all__ = ["in_metres", "in_seconds"]

_PREFIXES = {
    "yocto": 1e-24, "zepto": 1e-21, "atto": 1e-18, "femto": 1e-15, "pico": 1e-12, "nano": 1e-9,
    "micro": 1e-6, "milli": 1e-3, "centi": 1e-2, "deci": 1e-1, "": 1.0, "deca": 1e1, "hecto": 1e2,
    "kilo": 1e3, "mega": 1e6, "giga": 1e9, "tera": 1e12, "peta": 1e15, "exa": 1e18, "zetta": 1e21,
    "yotta": 1e24,
}
_METRES = {
    **{f"{prefix}meter": factor for prefix, factor in _PREFIXES.items()},
    "angstrom": 1e-10, "inch": 0.0254, "foot": 0.3048, "yard": 0.9144, "mile": 1609.344,
    "parsec": 3.0856775814913673e16,
}
_SECONDS = {
    **{f"{prefix}second": factor for prefix, factor in _PREFIXES.items()},
    "minute": 60.0, "hour": 3600.0, "day": 86400.0,
}


def in_metres(unit: str | None) -> float | None:
    """How many metres one `unit` is (None: not a unit of length OME-Zarr names)."""
    return _METRES.get(unit or "")


def in_seconds(unit: str | None) -> float | None:
    """How many seconds one `unit` is (None: not a unit of time OME-Zarr names)."""
    return _SECONDS.get(unit or "")
