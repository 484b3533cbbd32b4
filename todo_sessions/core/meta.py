"""Session metadata: the ``session/meta`` rules, and the projections the store keeps per session.

A ``session/meta`` event sets a session's title, tags and metadata object after it was
created; each key present in its payload replaces that field, keys left out change nothing,
and the last event that sets a field wins (docs/format.md, "Session metadata"). Together with
whether the latest ``todo/write`` leaves anything open, these are folded into columns of the
``sessions`` table at each append (`batch_change`), so `SessionStore.list` can filter on them
without reading any log. `fold_meta` is the same projection over a whole log. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .envelope import SessionEvent
from .types import SESSION_META, TODO_WRITE

__all__ = [
    "MAX_TAGS",
    "META_TYPE",
    "OPEN_STATUSES",
    "PROJECTED_TYPES",
    "TAG_MAX_LENGTH",
    "MetaChange",
    "SessionMeta",
    "add_usage",
    "batch_change",
    "fold_meta",
    "fold_title",
    "meta_problem",
    "tag_problem",
    "todos_open",
]

META_TYPE = SESSION_META
"""``session/meta`` (the name `todo_sessions.core.types` gives it too)."""
TAG_MAX_LENGTH = 200
MAX_TAGS = 100
OPEN_STATUSES = frozenset({"pending", "in_progress"})
"""The statuses of a todo that is not done: a list holding one has open todos."""


def tag_problem(tag: Any) -> str | None:
    """Why ``tag`` is not a valid tag, or None."""
    if not isinstance(tag, str):
        return f"must be a string, got {type(tag).__name__}"
    if not 1 <= len(tag) <= TAG_MAX_LENGTH:
        return f"must be 1 to {TAG_MAX_LENGTH} characters, got {len(tag)}"
    if not tag.isprintable():
        return "must not contain control or other unprintable characters"
    if tag != tag.strip():
        return "must not start or end with whitespace"
    return None


def meta_problem(data: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(field, problem)`` when a ``session/meta`` payload breaks the rules the payload model
    does not express, or None. The model has checked the types already (title a string or
    null, tags a list of strings, metadata an object)."""
    title = data.get("title")
    if isinstance(title, str) and "\x00" in title:
        return "data.title", "must not contain NUL characters"
    if "tags" in data:
        tags = data["tags"]
        if not isinstance(tags, list):
            return "data.tags", "must be a list of tags ([] clears them), not null"
        if len(tags) > MAX_TAGS:
            return "data.tags", f"at most {MAX_TAGS} tags, got {len(tags)}"
        seen: set[str] = set()
        for i, tag in enumerate(tags):
            problem = tag_problem(tag)
            if problem is None and tag in seen:
                problem = "duplicate tag"
            if problem is not None:
                return f"data.tags[{i}]", f"{problem}: {tag!r}"
            seen.add(tag)
    if "metadata" in data and not isinstance(data["metadata"], dict):
        return "data.metadata", "must be an object ({} clears it), not null"
    return None


def todos_open(data: Any) -> bool:
    """Whether a ``todo/write`` payload's list holds an item pending or in progress."""
    todos = data.get("todos") if isinstance(data, Mapping) else None
    if not isinstance(todos, list):
        return False
    return any(isinstance(t, Mapping) and t.get("status") in OPEN_STATUSES for t in todos)


def fold_title(title: str | None) -> str | None:
    """The title as the ``text`` filter compares it: `str.casefold`, so the match is
    case-insensitive in every language and the same on every backend."""
    return None if title is None else title.casefold()


@dataclass(frozen=True, slots=True)
class MetaChange:
    """What one append changes of a session's projected metadata.

    ``title_set`` says whether ``title`` is a new value (None clears it); ``tags``,
    ``metadata`` and ``open_todos`` are None when the batch does not change them.
    """

    title_set: bool = False
    title: str | None = None
    tags: tuple[str, ...] | None = None
    metadata: Mapping[str, Any] | None = None
    open_todos: bool | None = None


PROJECTED_TYPES = frozenset({META_TYPE, TODO_WRITE})
"""The event types whose batches change the projected columns (`batch_change`)."""
_PROJECTED = PROJECTED_TYPES


def batch_change(
    events: Iterable[SessionEvent], *, inherited_below: int | None = None
) -> MetaChange | None:
    """The change a batch of (valid) events makes, or None when it holds no ``session/meta``
    and no ``todo/write``: the last event of the batch that sets a field wins.

    ``inherited_below``: a fork's header carries the title it was given (or its source's
    current title), so a title set by an inherited event (seq below the fork's seed length)
    does not replace it. Tags and metadata are inherited like the rest of the log.
    """
    change: dict[str, Any] | None = None
    for event in events:
        kind = event.type
        if kind not in _PROJECTED:
            continue
        if change is None:
            change = {}
        data = event.payload
        if kind == SESSION_META:
            if "title" in data and (inherited_below is None or event.seq >= inherited_below):
                change["title_set"] = True
                change["title"] = data["title"]
            if "tags" in data:
                change["tags"] = tuple(data["tags"])
            if "metadata" in data:
                change["metadata"] = data["metadata"]
        else:
            change["open_todos"] = todos_open(data)
    return None if change is None else MetaChange(**change)


@dataclass(frozen=True, slots=True)
class SessionMeta:
    """A session's projected metadata (what `fold_meta` gives and the store keeps)."""

    title: str | None = None
    tags: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)
    open_todos: bool = False

    def apply(self, change: MetaChange | None) -> SessionMeta:
        if change is None:
            return self
        return SessionMeta(
            change.title if change.title_set else self.title,
            self.tags if change.tags is None else change.tags,
            self.metadata if change.metadata is None else change.metadata,
            self.open_todos if change.open_todos is None else change.open_todos,
        )


def fold_meta(
    events: Iterable[SessionEvent], *, title: str | None = None, seed_length: int | None = None
) -> SessionMeta:
    """The projected metadata of a whole log whose header has ``title`` (and, for a fork,
    ``seed_length``): what the store's columns hold after the log was appended in any
    batches."""
    start = SessionMeta(title=title)
    return start.apply(batch_change(events, inherited_below=seed_length))


def add_usage(total: dict[str, int | float], usage: Any, prefix: str = "") -> None:
    """Add the numbers of a stored ``usage`` object to ``total``: each numeric leaf under its
    key (nested objects as ``outer.inner``); booleans, strings and lists are not counted."""
    if not isinstance(usage, Mapping):
        return
    for key, value in usage.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            add_usage(total, value, f"{name}.")
        elif isinstance(value, int | float) and not isinstance(value, bool):
            total[name] = total.get(name, 0) + value
