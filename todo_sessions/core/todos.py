"""The todo list: items, the rules a stored ``todo/write`` must satisfy, projections.

See docs/format.md, "Todos".

`current_todos` and `standing_plan` scan the log from its end, so they cost as much as the
distance back to the latest ``todo/write`` (or ``turn/start``), not the whole log.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, TypeAdapter

from ..errors import InvalidEventError
from .types import TODO_WRITE, TURN_START

if TYPE_CHECKING:
    from .envelope import SessionEvent

__all__ = [
    "TODO_STATUSES",
    "TodoItem",
    "TodoStatus",
    "current_todos",
    "render_todos",
    "standing_plan",
    "todo_list_problem",
    "todos_from_payload",
]

TodoStatus = Literal["pending", "in_progress", "completed"]
TODO_STATUSES: tuple[str, ...] = ("pending", "in_progress", "completed")


class TodoItem(BaseModel):
    """One entry of the agent's task list. No id, no priority: content identifies it."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    content: str
    status: TodoStatus


_ITEMS = TypeAdapter(list[TodoItem])
"""The todo items of a checked list, built in one call (`todos_from_payload`)."""


def todo_list_problem(todos: Any) -> str | None:
    """Why a ``todo/write`` payload's ``todos`` value is not a valid stored list, or None.

    Rules: a list of objects, each with a non-empty (after trimming) string ``content`` that is
    unique after trimming, and a known ``status``.
    """
    if not isinstance(todos, Sequence) or isinstance(todos, str | bytes):
        return f"todos must be a list, got {type(todos).__name__}"
    seen: set[str] = set()
    for i, item in enumerate(todos):
        if not isinstance(item, dict):
            return f"todos[{i}] must be an object, got {type(item).__name__}"
        content = item.get("content")
        key = content.strip() if isinstance(content, str) else ""
        if not key:
            return f"todos[{i}].content must be a non-empty string"
        status = item.get("status")
        if status not in TODO_STATUSES:
            shown = json.dumps(status, ensure_ascii=False)  # JSON in, JSON out
            return f"todos[{i}].status must be one of {', '.join(TODO_STATUSES)}, got {shown}"
        if key in seen:
            return f"todos[{i}]: duplicate content {json.dumps(key, ensure_ascii=False)}"
        seen.add(key)
    return None


def todos_from_payload(data: Any, *, seq: int | None = None) -> list[TodoItem]:
    """The items of a ``todo/write`` payload, checked as on read.

    Raises `InvalidEventError` (field ``data.todos``; ``seq`` when given) if the payload breaks
    a durable rule. Content is returned as stored (the tool stores it trimmed).
    """
    where = f"{TODO_WRITE} (seq {seq})" if seq is not None else TODO_WRITE
    if not isinstance(data, Mapping):
        raise InvalidEventError(
            f"invalid {where}: data must be an object, got {type(data).__name__}",
            event_type=TODO_WRITE,
            seq=seq,
            field="data",
        )
    todos = data.get("todos")
    problem = todo_list_problem(todos)
    if problem:
        raise InvalidEventError(
            f"invalid {where}: {problem}", event_type=TODO_WRITE, seq=seq, field="data.todos"
        )
    assert todos is not None  # todo_list_problem refused anything that is not a list
    # one pydantic-core call for the whole list (a model per item cost about twice as much;
    # model_construct, pure Python, three times); other keys of a stored item are left out
    return _ITEMS.validate_python(
        [{"content": item["content"], "status": item["status"]} for item in todos]
    )


def current_todos(events: Sequence[SessionEvent]) -> list[TodoItem] | None:
    """The list of the latest ``todo/write``; ``None`` if there is none, ``[]`` once cleared."""
    for event in reversed(events):
        if event.type == TODO_WRITE:
            return todos_from_payload(event.data, seq=event.seq)
    return None


def standing_plan(events: Sequence[SessionEvent]) -> list[TodoItem] | None:
    """What a UI shows: like `current_todos`, but ``None`` once a later ``turn/start`` begins."""
    for event in reversed(events):
        if event.type == TODO_WRITE:
            return todos_from_payload(event.data, seq=event.seq)
        if event.type == TURN_START:
            return None
    return None


_MARKS: dict[str, str] = {"completed": "[x]", "in_progress": "[~]", "pending": "[ ]"}


def render_todos(todos: Sequence[TodoItem]) -> str:
    """Terminal text: a ``[todos]`` line, then ``[x]``/``[~]``/``[ ]`` and the content per item."""
    lines = ["[todos]"]
    lines.extend(f"{_MARKS[item.status]} {item.content}" for item in todos)
    return "\n".join(lines)
