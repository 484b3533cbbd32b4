"""Value types stay immutable and closed (issue #17).

Each of these is handed out to callers (or kept per tool call) and must not change under them:
frozen dataclasses and models refuse assignment, slotted ones refuse new attributes (a typo such
as ``call.anwsered = True`` fails instead of passing silently), and `TodoItem` is strict.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from pydantic import ValidationError

from todo_sessions.core.structure import OpenCall, _Call
from todo_sessions.core.surface import Replacement, SurfaceFold
from todo_sessions.core.todos import TodoItem
from todo_sessions.core.verify import Problem

FROZEN: list[tuple[Any, str]] = [
    (OpenCall("c1", "read", 1, 1, 3, 2), "call_id"),
    (Replacement(5, 1, 3, (1, 2, 3)), "seq"),
    (SurfaceFold((0, 5), ()), "seqs"),
    (Problem(3, "seq", "expected seq 2"), "message"),
]


@pytest.mark.parametrize("value", [v for v, _ in FROZEN], ids=lambda v: type(v).__name__)
def test_frozen_slotted_values(value: Any) -> None:
    field = dict((type(v), f) for v, f in FROZEN)[type(value)]
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(value, field, None)
    assert not hasattr(value, "__dict__")
    with pytest.raises((AttributeError, TypeError)):
        value.extra = 1
    assert hash(value) == hash(dataclasses.replace(value))
    assert value == dataclasses.replace(value)


def test_the_per_call_record_is_slotted() -> None:
    call = _Call("c1", "read", 1, 1)
    call.answered = True  # mutable on purpose: advance() updates it in place
    assert not hasattr(call, "__dict__")
    with pytest.raises(AttributeError):
        call.anwsered = True  # type: ignore[attr-defined]


def test_todo_item_is_frozen() -> None:
    item = TodoItem(content="write tests", status="pending")
    with pytest.raises(ValidationError) as info:
        item.status = "completed"  # type: ignore[misc]
    assert info.value.errors()[0]["type"] == "frozen_instance"
    assert item.status == "pending"
    assert hash(item) == hash(TodoItem(content="write tests", status="pending"))


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ({"content": b"write tests", "status": "pending"}, "string_type"),  # lax mode: accepted
        ({"content": "write tests", "status": b"pending"}, "literal_error"),
        ({"content": 3, "status": "pending"}, "string_type"),
        ({"content": "x", "status": "done"}, "literal_error"),
        ({"content": "x", "status": "pending", "priority": 1}, "extra_forbidden"),
    ],
)
def test_todo_item_is_strict_and_closed(data: dict[str, Any], error: str) -> None:
    with pytest.raises(ValidationError) as info:
        TodoItem.model_validate(data)
    assert info.value.errors()[0]["type"] == error


def test_todo_item_config() -> None:
    config = TodoItem.model_config
    assert (config.get("frozen"), config.get("strict"), config.get("extra")) == (
        True,
        True,
        "forbid",
    )
