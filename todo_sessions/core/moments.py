"""Moments and durations as people type them, as epoch milliseconds: the one parser of the
command line's ``--since``/``--until``/``--older-than``, the viewer's filters and the library's
``older_than``. Pure: the present moment is an argument, never read here.

- A duration is a whole number and a unit, ``s``, ``m``, ``h``, ``d`` or ``w`` (space allowed
  between): ``30m``, ``12h``, ``90d``, ``2w``.
- A moment is an ISO 8601 date or date and time (``2026-12-01``, ``2026-12-01T09:30``, with an
  optional offset or ``Z``; without one it is UTC, or local time where the caller says so), or
  a duration ago. Moments run from the year 1 to the year 9999.

Bad text raises `ValueError` with a message that starts after the name of the field (``must
be ...``, ``is out of range ...``), so a caller prefixes its own name (``--since``, ``since``)
and raises its own kind of error.
"""

from __future__ import annotations

import datetime
import re
from typing import NamedTuple

__all__ = ["UNIT_MS", "Moment", "duration_ms", "parse_duration", "parse_moment"]

UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}
"""Milliseconds of each duration unit."""

_DURATION = re.compile(r"^(\d{1,12})\s*([smhdw])$")
_MIN_MS = int(datetime.datetime(1, 1, 1, tzinfo=datetime.UTC).timestamp() * 1000)
_MAX_MS = int(datetime.datetime(9999, 12, 31, 23, 59, 59, tzinfo=datetime.UTC).timestamp() * 1000)
_DURATION_FORMS = "30m, 2h, 7d, 1w"


class Moment(NamedTuple):
    """A parsed moment: epoch ``ms``, and whether the text was a duration ago (``ago``: it
    names another moment each time it is read, so a caller that keeps it keeps ``ms``)."""

    ms: int
    ago: bool


def parse_duration(text: str) -> int:
    """The milliseconds of a duration (``30m``, ``12h``, ``90d``, ``2w``); `ValueError` for
    anything else."""
    found = _DURATION.match(text.strip())
    if found is None:
        raise ValueError(f"must be a duration such as {_DURATION_FORMS}, got {text!r}")
    return int(found.group(1)) * UNIT_MS[found.group(2)]


def parse_moment(text: str, *, now_ms: int, local: bool = False) -> Moment:
    """The moment ``text`` names (see the module docstring): a duration is taken back from
    ``now_ms``; a date or time without an offset is UTC, or local time with ``local``.
    `ValueError` for any other text and for a moment outside the years 1 to 9999."""
    stripped = text.strip()
    if _DURATION.match(stripped) is not None:
        ms = now_ms - parse_duration(stripped)
        if ms < _MIN_MS:
            raise ValueError(f"reaches back before the year 1, got {text!r}")
        return Moment(ms, True)
    try:
        moment = datetime.datetime.fromisoformat(stripped)
    except ValueError:
        zone = "local time" if local else "UTC"
        raise ValueError(
            "must be a date or time (2026-12-01, 2026-12-01T09:30, with an optional offset; "
            f"{zone} without one) or a duration ago ({_DURATION_FORMS}), got {text!r}"
        ) from None
    try:
        if moment.tzinfo is None:
            moment = moment.astimezone() if local else moment.replace(tzinfo=datetime.UTC)
        ms = int(moment.timestamp() * 1000)
    except (OverflowError, ValueError, OSError):  # an offset that leaves years 1..9999
        raise ValueError(f"is out of range, got {text!r}") from None
    if not _MIN_MS <= ms <= _MAX_MS:
        raise ValueError(f"is out of range, got {text!r}")
    return Moment(ms, False)


def duration_ms(value: datetime.timedelta | int) -> int:
    """A duration given as a `datetime.timedelta` or an int of milliseconds >= 0, in ms
    (`TypeError` for anything else: the library's ``older_than``)."""
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    if type(value) is int and value >= 0:
        return value
    raise TypeError(f"must be a timedelta or an int of ms >= 0, got {value!r}")
