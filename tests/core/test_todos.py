"""Todo projections and rendering (docs/format.md, "Todos")."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from logs import T0, LogBuilder

from todo_sessions.core.envelope import SessionEvent
from todo_sessions.core.todos import (
    TodoItem,
    current_todos,
    render_todos,
    standing_plan,
    todos_from_payload,
)
from todo_sessions.errors import InvalidEventError


def _items(*pairs: tuple[str, str]) -> list[TodoItem]:
    return [TodoItem(content=c, status=s) for c, s in pairs]  # type: ignore[arg-type]


A = ("write tests", "in_progress")
B = ("fix bug", "pending")
C = ("read code", "completed")


def _no_writes(b: LogBuilder) -> None:
    b.exchange("hi")


def _one_write(b: LogBuilder) -> None:
    b.turn_start()
    b.user("plan it")
    b.todo(A, B)
    b.turn_end()


def _last_write_wins(b: LogBuilder) -> None:
    b.turn_start()
    b.todo(A, B)
    b.step_start()
    b.assistant("working")
    b.step_end()
    b.todo(C, A)
    b.turn_end()


def _cleared(b: LogBuilder) -> None:
    b.turn_start()
    b.todo(A, B)
    b.todo()
    b.turn_end()


def _cleared_then_new_turn(b: LogBuilder) -> None:
    _cleared(b)
    b.turn_start()
    b.user("next")


def _new_turn_hides_plan(b: LogBuilder) -> None:
    _one_write(b)
    b.turn_start()
    b.user("something else")


def _new_turn_then_write(b: LogBuilder) -> None:
    _new_turn_hides_plan(b)
    b.todo(C)


def _write_in_open_turn(b: LogBuilder) -> None:
    b.exchange("first")
    b.turn_start()
    b.user("second")
    b.todo(B)
    b.step_start()
    b.assistant("on it", calls=["c1"])


def _replace_then_many_events(b: LogBuilder) -> None:
    b.turn_start()
    b.todo(A)
    b.todo(A, B, C)
    b.turn_end()
    b.exchange("a", "c1", "c2")
    b.user("after, outside a turn")


CASES: list[tuple[Callable[[LogBuilder], None], object, object]] = [
    (_no_writes, None, None),
    (_one_write, _items(A, B), _items(A, B)),
    (_last_write_wins, _items(C, A), _items(C, A)),
    (_cleared, [], []),
    (_cleared_then_new_turn, [], None),
    (_new_turn_hides_plan, _items(A, B), None),
    (_new_turn_then_write, _items(C), _items(C)),
    (_write_in_open_turn, _items(B), _items(B)),
    (_replace_then_many_events, _items(A, B, C), None),
]


@pytest.mark.parametrize(
    ("script", "current", "standing"), CASES, ids=[case[0].__name__ for case in CASES]
)
def test_projections(
    script: Callable[[LogBuilder], None], current: object, standing: object
) -> None:
    b = LogBuilder()
    script(b)
    assert current_todos(b.events) == current
    assert standing_plan(b.events) == standing


def test_projections_of_an_empty_log() -> None:
    assert current_todos([]) is None
    assert standing_plan([]) is None


def test_projection_returns_fresh_lists() -> None:
    b = LogBuilder()
    _one_write(b)
    first = current_todos(b.events)
    assert first is not None
    first.clear()
    assert current_todos(b.events) == _items(A, B)


def test_stored_write_is_checked_on_read() -> None:
    bad = SessionEvent("todo/write", 0, T0, {"todos": [{"content": " ", "status": "pending"}]})
    with pytest.raises(InvalidEventError) as info:
        current_todos([bad])
    assert (info.value.event_type, info.value.seq, info.value.field) == (
        "todo/write",
        0,
        "data.todos",
    )


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({}, "todos must be a list"),
        ({"todos": "x"}, "todos must be a list"),
        ({"todos": ["x"]}, "must be an object"),
        ({"todos": [{"content": "", "status": "pending"}]}, "non-empty string"),
        ({"todos": [{"content": 3, "status": "pending"}]}, "non-empty string"),
        ({"todos": [{"content": "a", "status": "done"}]}, "status must be one of"),
        (
            {
                "todos": [
                    {"content": "a", "status": "pending"},
                    {"content": " a ", "status": "pending"},
                ]
            },
            'duplicate content "a"',
        ),
        ([], "data must be an object"),
    ],
)
def test_todos_from_payload_rejects(data: object, problem: str) -> None:
    with pytest.raises(InvalidEventError, match=problem):
        todos_from_payload(data, seq=7)


def test_todos_from_payload_accepts() -> None:
    data = {
        "todos": [{"content": "a", "status": "pending"}, {"content": "b", "status": "completed"}]
    }
    assert todos_from_payload(data) == _items(("a", "pending"), ("b", "completed"))
    assert todos_from_payload({"todos": []}) == []


@pytest.mark.parametrize(
    ("todos", "text"),
    [
        ([], "[todos]"),
        (_items(C), "[todos]\n[x] read code"),
        (
            _items(C, A, B),
            "[todos]\n[x] read code\n[~] write tests\n[ ] fix bug",
        ),
    ],
)
def test_render_todos(todos: list[TodoItem], text: str) -> None:
    assert render_todos(todos) == text
