"""CF time coordinates ("hours since 2000-01-01", with a `calendar`) as ISO 8601 text, for band
names. Pure. The real-world calendars go through numpy's datetime64 (proleptic Gregorian);
the fixed-length-year model calendars (noleap, all_leap, 360_day) and the Julian calendar are
counted by hand, so no cftime is needed; any other calendar is left undecoded (None). (The CF
"standard" calendar is Julian before 1582-10-15; dates that early are shown proleptic
Gregorian.)"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np

__all__ = ["iso_times"]

_UNIT_SECONDS = {
    "second": 1, "seconds": 1, "sec": 1, "secs": 1, "s": 1,
    "minute": 60, "minutes": 60, "min": 60, "mins": 60,
    "hour": 3600, "hours": 3600, "hr": 3600, "hrs": 3600, "h": 3600,
    "day": 86400, "days": 86400, "d": 86400,
}
_GREGORIAN = {"standard", "gregorian", "proleptic_gregorian"}
_FIXED_MONTHS = {
    "noleap": (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31),
    "365_day": (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31),
    "all_leap": (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31),
    "366_day": (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31),
    "360_day": (30,) * 12,
}
_REFERENCE = re.compile(
    r"\s*(?P<unit>\w+)\s+since\s+(?P<y>-?\d{1,4})-(?P<mo>\d{1,2})-(?P<d>\d{1,2})"
    r"(?:[ T](?P<h>\d{1,2}):(?P<mi>\d{1,2})(?::(?P<s>\d{1,2}(?:\.\d*)?))?)?"
    r"\s*(?:Z|UTC|[+-]00(?::?00)?)?\s*$",
    re.IGNORECASE,
)
# Beyond this many seconds from the reference a count is not a date anyone means (and would
# overflow datetime64[s]).
_MAX_SECONDS = 1e15


def iso_times(values: Sequence[float], units: str, calendar: str | None) -> list[str] | None:
    """Each count of `units` as ISO 8601 text, or None when the units or calendar are not
    understood (the caller then shows the numbers)."""
    found = _REFERENCE.match(units)
    if found is None or found["unit"].lower() not in _UNIT_SECONDS:
        return None
    step = _UNIT_SECONDS[found["unit"].lower()]
    seconds = [float(v) * step for v in values]
    if not all(math.isfinite(s) and abs(s) < _MAX_SECONDS for s in seconds):
        return None
    date = (int(found["y"]), int(found["mo"]), int(found["d"]))
    clock = int(found["h"] or 0) * 3600 + int(found["mi"] or 0) * 60 + float(found["s"] or 0)
    name = (calendar or "standard").lower()
    if name in _GREGORIAN:
        return _gregorian(date, clock, seconds)
    if name in _FIXED_MONTHS:
        return _fixed_year(date, clock, seconds, _FIXED_MONTHS[name])
    if name == "julian":
        return _julian(date, clock, seconds)
    return None


def _gregorian(date: tuple[int, int, int], clock: float, seconds: list[float]) -> list[str] | None:
    try:
        start = np.datetime64(f"{date[0]:04d}-{date[1]:02d}-{date[2]:02d}", "s")
    except ValueError:
        return None
    stamps = [start + np.timedelta64(round(clock + s), "s") for s in seconds]
    return [str(np.datetime_as_string(t, unit="s")) for t in stamps]


def _fixed_year(date: tuple[int, int, int], clock: float, seconds: list[float],
                months: tuple[int, ...]) -> list[str] | None:
    year, month, day = date
    if not (1 <= month <= 12 and 1 <= day <= months[month - 1]):
        return None
    before = [sum(months[:m]) for m in range(12)]
    origin = (year * sum(months) + before[month - 1] + day - 1) * 86400 + clock
    return [_fixed_text(round(origin + s), months, before) for s in seconds]


def _fixed_text(total: int, months: tuple[int, ...], before: list[int]) -> str:
    days, second = divmod(total, 86400)
    year, day_of_year = divmod(days, sum(months))
    month = max(m for m in range(12) if before[m] <= day_of_year)
    day = day_of_year - before[month] + 1
    hour, rest = divmod(second, 3600)
    return f"{year:04d}-{month + 1:02d}-{day:02d}T{hour:02d}:{rest // 60:02d}:{rest % 60:02d}"


def _julian(date: tuple[int, int, int], clock: float, seconds: list[float]) -> list[str] | None:
    """Through the Julian Day Number: every fourth year a leap year, 1900 included."""
    year, month, day = date
    if not (1 <= month <= 12 and 1 <= day <= 31):
        return None
    shift = (14 - month) // 12
    y, m = year + 4800 - shift, month + 12 * shift - 3
    origin = (day + (153 * m + 2) // 5 + 365 * y + y // 4 - 32083) * 86400 + clock
    return [_julian_text(round(origin + s)) for s in seconds]


def _julian_text(total: int) -> str:
    number, second = divmod(total, 86400)
    c = number + 32082
    d = (4 * c + 3) // 1461
    e = c - 1461 * d // 4
    m = (5 * e + 2) // 153
    day, month, year = e - (153 * m + 2) // 5 + 1, m + 3 - 12 * (m // 10), d - 4800 + m // 10
    hour, rest = divmod(second, 3600)
    return f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:{rest // 60:02d}:{rest % 60:02d}"
