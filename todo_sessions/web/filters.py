"""The session list: its filters as query parameters (`parse_filters`, `ListFilters`) and one
page of it read through `SessionStore.list` (`list_page`), as plain data (no HTML)."""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.moments import parse_moment as core_parse_moment
from ..core.types import TURN_START
from ..store.results import SessionSummary
from ..store.store import SessionStore, wall_clock_ms

__all__ = [
    "FILTER_NAMES",
    "FilterError",
    "ListEntry",
    "ListFilters",
    "list_page",
    "parse_filters",
    "parse_moment",
]


class FilterError(ValueError):
    """A list filter given in a bad form; the message names the parameter (a 400)."""


FILTER_TEXT_MAX = 1000
"""The longest text a string filter may hold (a tag is at most 200 characters anyway)."""

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_YES = {"yes": True, "true": True, "1": True, "no": False, "false": False, "0": False}


def iso(ms: int) -> str:
    """Epoch ms as ISO 8601 in UTC to the millisecond (``2026-12-01T09:30:00.000Z``): the form
    in which a moment goes into a next-page link, read back exactly."""
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_moment(name: str, raw: str, now_ms: int) -> tuple[int, str]:
    """``since``/``until`` as epoch ms, and the text that means that moment from now on: the
    formats of the command line's ``list --since``: an ISO 8601 date or date and time
    (``2026-12-01``, ``2026-12-01T09:30``, with an optional offset or ``Z``) or a duration ago
    (``30m``, ``2h``, ``7d``, ``1w``). A date or time without an offset is UTC here (the pages
    show times in UTC), where the command line takes local time. A duration is resolved
    against ``now_ms`` and its text becomes the exact moment (so a next page keeps the bounds
    of the first)."""
    try:
        moment = core_parse_moment(raw, now_ms=now_ms)
    except ValueError as exc:
        raise FilterError(f"{name} {exc}") from None
    return moment.ms, iso(moment.ms) if moment.ago else raw.strip()


@dataclass(frozen=True)
class ListFilters:
    """The filters of the session list, as `SessionStore.list` takes them (None: not
    filtered). ``since_text``/``until_text`` are what the form and the links show."""

    cwd: str | None = None
    tag: str | None = None
    text: str | None = None
    parent: str | None = None
    open_todos: bool | None = None
    since: int | None = None
    until: int | None = None
    since_text: str = ""
    until_text: str = ""

    def store_kwargs(self) -> dict[str, Any]:
        return {
            "cwd": self.cwd,
            "tag": self.tag,
            "text": self.text,
            "parent": self.parent,
            "has_open_todos": self.open_todos,
            "since": self.since,
            "until": self.until,
        }

    def params(self) -> dict[str, str]:
        """The query parameters that give these filters again (only the ones set)."""
        out: dict[str, str] = {}
        for name in ("cwd", "tag", "text", "parent"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        if self.open_todos is not None:
            out["open_todos"] = "yes" if self.open_todos else "no"
        if self.since is not None:
            out["since"] = self.since_text
        if self.until is not None:
            out["until"] = self.until_text
        return out

    @property
    def active(self) -> bool:
        return bool(self.params())

    def is_date(self, which: str) -> bool:
        """Whether the form can show ``since``/``until`` in a date field (empty, or a plain
        date); a time or an offset is shown as text instead, so it is not lost."""
        value: str = getattr(self, f"{which}_text")
        return value == "" or _DATE.match(value) is not None


FILTER_NAMES = ("cwd", "tag", "text", "parent", "open_todos", "since", "until")


def parse_filters(params: Mapping[str, Sequence[str]], now_ms: int | None = None) -> ListFilters:
    """The filters in query parameters (each name to its list of values). An empty value is no
    filter (what a form sends for a field left blank). Raises `FilterError` naming the
    parameter: given twice, too long, a NUL character, a bad ``open_todos`` or moment."""
    now = wall_clock_ms() if now_ms is None else now_ms
    values: dict[str, str] = {}
    for name in FILTER_NAMES:
        given = [v for v in params.get(name, ()) if v != ""]
        if len(given) > 1:
            raise FilterError(f"{name} is given {len(given)} times; give it once")
        if not given:
            continue
        value = given[0]
        if len(value) > FILTER_TEXT_MAX:
            raise FilterError(f"{name} must be at most {FILTER_TEXT_MAX} characters")
        if "\x00" in value:
            raise FilterError(f"{name} must not contain NUL characters")
        values[name] = value
    open_todos: bool | None = None
    raw_open = values.get("open_todos", "any")
    if raw_open.lower() != "any":
        if raw_open.lower() not in _YES:
            raise FilterError(f"open_todos must be yes, no or any, got {raw_open!r}")
        open_todos = _YES[raw_open.lower()]
    moments: dict[str, tuple[int | None, str]] = {"since": (None, ""), "until": (None, "")}
    for name in moments:
        if name in values:
            moments[name] = parse_moment(name, values[name], now)
    (since, since_text), (until, until_text) = moments["since"], moments["until"]
    return ListFilters(
        cwd=values.get("cwd"),
        tag=values.get("tag"),
        text=values.get("text"),
        parent=values.get("parent"),
        open_todos=open_todos,
        since=since,
        until=until,
        since_text=since_text,
        until_text=until_text,
    )


@dataclass(frozen=True)
class ListEntry:
    summary: SessionSummary
    turns: int

    def to_json(self) -> dict[str, Any]:
        """The summary's JSON object (`SessionSummary.to_dict`) with its turn count."""
        return {**self.summary.to_dict(), "turns": self.turns}


async def list_page(
    store: SessionStore,
    *,
    limit: int,
    before: str | None,
    filters: ListFilters | None = None,
) -> tuple[list[ListEntry], str | None]:
    """One page of `SessionStore.list` (newest activity first, narrowed by ``filters``) with
    turn counts, and the id to pass as ``before`` for the next page (None on the last page)."""
    after = await store.summary(before) if before is not None else None
    kwargs = (filters or ListFilters()).store_kwargs()
    summaries = await store.list(limit=limit, before=after, **kwargs)
    entries = [ListEntry(s, await store.count(s.id, type=TURN_START)) for s in summaries]
    more = entries[-1].summary.id if len(entries) == limit else None
    return entries, more
