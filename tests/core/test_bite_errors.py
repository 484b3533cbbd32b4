"""Representative errors name the event type and "(seq N)" in full (issue #17)."""

from __future__ import annotations

from typing import Any

import pytest
from logs import T0, LogBuilder

from todo_sessions.core.envelope import SessionEvent
from todo_sessions.core.structure import StructureChecker, check_structure
from todo_sessions.core.surface import SurfaceState
from todo_sessions.core.todos import current_todos, todos_from_payload
from todo_sessions.errors import InvalidEventError, StructureError


@pytest.mark.parametrize(
    ("data", "seq", "text", "field"),
    [
        (
            {"todos": [{"content": " ", "status": "pending"}]},
            7,
            "invalid todo/write (seq 7): todos[0].content must be a non-empty string",
            "data.todos",
        ),
        ({"todos": "x"}, None, "invalid todo/write: todos must be a list, got str", "data.todos"),
        ([], 3, "invalid todo/write (seq 3): data must be an object, got list", "data"),
    ],
)
def test_todo_write_errors(data: Any, seq: int | None, text: str, field: str) -> None:
    with pytest.raises(InvalidEventError) as info:
        todos_from_payload(data, seq=seq)
    assert str(info.value) == text
    assert (info.value.event_type, info.value.seq, info.value.field) == ("todo/write", seq, field)


def test_a_stored_todo_write_error_names_its_seq() -> None:
    events = [
        SessionEvent("turn/start", 0, T0, {"turn": 1}),
        SessionEvent("todo/write", 1, T0, {"todos": [{"content": "a", "status": "later"}]}),
    ]
    with pytest.raises(InvalidEventError) as info:
        current_todos(events)
    assert str(info.value).startswith("invalid todo/write (seq 1): todos[0].status must be one of")
    assert (info.value.event_type, info.value.seq) == ("todo/write", 1)


def test_structure_errors_in_full() -> None:
    b = LogBuilder()
    b.turn_start()
    b.turn_start()
    with pytest.raises(StructureError) as info:
        check_structure(b.events)
    assert str(info.value) == "turn/start (turn 2) while turn 1 is still open (seq 1)"
    assert (info.value.rule, info.value.seq) == ("turn-nested", 1)

    checker = StructureChecker()
    with pytest.raises(StructureError) as seq:
        checker.check(SessionEvent("turn/start", 3, T0, {"turn": 1}))
    assert str(seq.value) == (
        "turn/start has seq 3, expected seq 0 (seqs run 0, 1, 2, … with no gaps) (seq 3)"
    )
    assert (seq.value.rule, seq.value.seq) == ("seq", 3)


def test_a_surface_error_in_full() -> None:
    b = LogBuilder()
    b.user("a")
    state = SurfaceState()
    state.apply(b.events[0])
    bad = SessionEvent("todo/write", 1, T0, {"todos": []}, surface_op="append")
    with pytest.raises(InvalidEventError) as info:
        state.apply(bad)
    assert str(info.value) == (
        "event 'todo/write' (seq 1): may not carry surfaceOp: only surface events "
        "(user/message, assistant/message, tool/result) do"
    )
    assert (info.value.event_type, info.value.seq, info.value.field) == (
        "todo/write",
        1,
        "surfaceOp",
    )
