"""Building a surface node's message, and `fold_surface` not building any (issue #17)."""

from __future__ import annotations

from typing import Any

import pytest
from logs import T0, LogBuilder

from todo_sessions.core.envelope import SessionEvent
from todo_sessions.core.surface import (
    MessageSnapshot,
    Replacement,
    SurfaceFold,
    SurfaceState,
    derive_messages,
    fold_surface,
)
from todo_sessions.errors import InvalidEventError

BAD_MESSAGES: list[tuple[str, Any, str]] = [
    (
        "user/message",
        {"id": "", "role": "user", "content": 5, "source": {"kind": "user"}},
        "String should have at least 1 character",  # the first of two problems
    ),
    ("user/message", [], "Input should be a valid dictionary or instance of UserMessage"),
    (
        "assistant/message",
        {"turn": 1},
        "missing or malformed message (KeyError: 'message')",
    ),
    (
        "assistant/message",
        {"message": []},
        "missing or malformed message (AttributeError: 'list' object has no attribute 'get')",
    ),
    (
        "assistant/message",
        [],
        "missing or malformed message (TypeError: list indices must be integers or slices, "
        "not str)",
    ),
    ("assistant/message", {"message": {"content": [{"type": "text", "text": "x"}]}}, "required"),
    ("tool/result", {}, "missing or malformed message (KeyError: 'message')"),
    ("tool/result", {"message": 3}, "Input should be a valid dictionary"),
]


@pytest.mark.parametrize(
    ("kind", "data", "detail"), BAD_MESSAGES, ids=[f"{k}:{d!r}"[:50] for k, d, _ in BAD_MESSAGES]
)
def test_a_message_that_cannot_be_built_is_an_invalid_event(
    kind: str, data: Any, detail: str
) -> None:
    event = SessionEvent(kind, 4, T0, data, surface_op="append")
    with pytest.raises(InvalidEventError) as info:
        derive_messages([event])
    error = info.value
    assert str(error).startswith(f"event {kind!r} (seq 4): cannot build its message: ")
    assert detail in str(error)
    assert (error.event_type, error.seq, error.field) == (kind, 4, "data")


def test_fold_surface_folds_seqs_without_building_messages() -> None:
    b = LogBuilder(validate=False)
    b.user("a")
    b.add("assistant/message", {"turn": 1}, surface_op="append")  # no message: cannot build
    b.add("tool/result", {"message": 3}, surface_op="append")
    b.user("b")
    b.compact(1, 2, "summary")
    assert fold_surface(b.events) == SurfaceFold(
        seqs=(0, 4, 3), replacements=(Replacement(4, 1, 2, (1, 2)),)
    )
    with pytest.raises(InvalidEventError, match=r"\(seq 1\): cannot build its message"):
        derive_messages(b.events)


def test_a_state_without_messages_refuses_snapshots() -> None:
    state = SurfaceState(build_messages=False)
    with pytest.raises(RuntimeError) as info:
        state.snapshot()
    assert str(info.value) == "this SurfaceState was created with build_messages=False"
    assert isinstance(SurfaceState().snapshot(), MessageSnapshot)


def test_snapshot_index_out_of_range_says_so() -> None:
    b = LogBuilder()
    b.user("a")
    state = SurfaceState()
    state.apply(b.events[0])
    snap = state.snapshot()
    for index in (1, -2):
        with pytest.raises(IndexError) as info:
            snap[index]
        assert str(info.value) == "message index out of range"
    assert snap[-1] is snap[0]
