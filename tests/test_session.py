"""The live `Session`: seq/time assignment, validation, incremental projections.

See docs/design.md, "Live sessions".
"""

from __future__ import annotations

import logging
from typing import Any, Literal

import pytest
from hypothesis import given, settings
from logs import LogBuilder, build_plan, log_plans
from pydantic import BaseModel, ConfigDict

from todo_sessions import (
    InvalidEventError,
    Session,
    SessionEvent,
    SessionHeader,
    StructureError,
    _vocabularies,
    register_event_type,
)
from todo_sessions.core import registry
from todo_sessions.core.compaction import PendingEvent
from todo_sessions.core.surface import derive_messages
from todo_sessions.core.todos import current_todos, standing_plan

HEADER = SessionHeader(id="live", created_at=0)


def clock() -> Any:
    ticks = iter(range(1000, 10**9))
    return lambda: next(ticks)


def replay(events: list[SessionEvent], *, strict: bool = True) -> Session:
    """Append each event's payload through a live session (seq and time reassigned)."""
    session = Session(HEADER, strict=strict, clock=clock())
    for event in events:
        session.append(
            event.type,
            event.data_copy(),
            surface_op=event.surface_op,
            source_event_seqs=event.source_event_seqs,
            ignorable=event.ignorable,
        )
    return session


def test_append_assigns_seq_and_time() -> None:
    session = Session(HEADER, clock=clock())
    first = session.append("turn/start", {"turn": 1})
    second = session.append("todo/write", {"todos": []})
    assert (first.seq, first.time, second.seq, second.time) == (0, 1000, 1, 1001)
    assert list(session.events) == [first, second]
    assert session.next_seq == 2


def test_surface_events_need_a_surface_op_in_a_live_session() -> None:
    b = LogBuilder()
    b.turn_start()
    user = b.user()
    session = Session(HEADER)
    session.append("turn/start", {"turn": 1})
    with pytest.raises(InvalidEventError, match="surfaceOp") as info:
        session.append("user/message", user.data_copy())
    assert info.value.field == "surfaceOp"
    assert len(session.events) == 1


def test_strict_mode_vetoes_and_commits_nothing() -> None:
    session = Session(HEADER, strict=True)
    with pytest.raises(StructureError, match="todo/write appended outside any open turn"):
        session.append("todo/write", {"todos": []})
    assert len(session.events) == 0 and session.todos is None
    lenient = Session(HEADER, strict=False)
    lenient.append("todo/write", {"todos": []})
    assert lenient.todos == []


def test_invalid_payload_commits_nothing_and_notifies_nobody() -> None:
    seen: list[int] = []
    session = Session(HEADER)
    session.subscribe(lambda e: seen.append(e.seq))
    with pytest.raises(InvalidEventError):
        session.append("todo/write", {"todos": [{"content": "", "status": "pending"}]})
    with pytest.raises(InvalidEventError):
        session.append("assistant/message", {"turn": 1}, surface_op="append")
    assert seen == [] and len(session.events) == 0


def test_subscribers_run_after_commit_and_failures_are_contained(
    caplog: pytest.LogCaptureFixture,
) -> None:
    session = Session(HEADER)
    seen: list[tuple[int, int]] = []

    def boom(event: SessionEvent) -> None:
        raise RuntimeError("subscriber bug")

    session.subscribe(boom)
    unsubscribe = session.subscribe(lambda e: seen.append((e.seq, len(session.events))))
    with caplog.at_level(logging.ERROR, logger="todo_sessions.session"):
        event = session.append("turn/start", {"turn": 1})
    assert seen == [(0, 1)]  # committed before notification
    assert session.events[-1] == event
    assert "subscriber bug" in caplog.text
    unsubscribe()
    unsubscribe()  # harmless twice
    session.append("todo/write", {"todos": []})
    assert seen == [(0, 1)]


def test_append_from_inside_a_subscriber_is_refused() -> None:
    session = Session(HEADER)
    errors: list[BaseException] = []

    def reentrant(event: SessionEvent) -> None:
        try:
            session.append("todo/write", {"todos": []})
        except RuntimeError as exc:
            errors.append(exc)

    session.subscribe(reentrant)
    session.append("turn/start", {"turn": 1})
    assert len(errors) == 1 and "subscriber" in str(errors[0])
    assert len(session.events) == 1


def test_append_all_from_inside_a_subscriber_is_refused() -> None:
    session = Session(HEADER)
    errors: list[BaseException] = []

    def reentrant(event: SessionEvent) -> None:
        try:
            session.append_all([PendingEvent("todo/write", {"todos": []})])
        except RuntimeError as exc:
            errors.append(exc)

    session.subscribe(reentrant)
    session.append("turn/start", {"turn": 1})
    assert [str(e) for e in errors] == [
        "session 'live': append from inside a subscriber is not allowed (subscribers must see "
        "events in log order)"
    ]
    assert len(session.events) == 1


class _LateData(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")
    reason: Literal["ok"]


@pytest.mark.parametrize("how", ["append", "append_all"])
def test_a_type_of_a_vocabulary_not_yet_loaded_is_known_before_the_append_validates(
    monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    name = "test/late-vocabulary"
    for table in (registry._REGISTRY, registry._CHECKS):  # gone again after the test
        monkeypatch.setitem(table, name, None)
        monkeypatch.delitem(table, name)
    loads: list[str] = []

    def load() -> list[str]:
        loads.append(name)
        register_event_type(name, _LateData)
        return [name]

    monkeypatch.setattr(_vocabularies, "_started", False)
    monkeypatch.setattr(_vocabularies, "_done", False)
    monkeypatch.setattr(_vocabularies, "load_vocabularies", load)
    session = Session(SessionHeader(id="s", created_at=1))
    with pytest.raises(InvalidEventError) as caught:  # validated: the vocabulary was loaded
        if how == "append":
            session.append(name, {"reason": "other"}, ignorable=True)
        else:  # not ignorable: without the vocabulary, refused as an unknown type
            session.append_all([PendingEvent(name, {"reason": "other"})])
    assert (caught.value.event_type, caught.value.field) == (name, "data.reason")
    assert loads == [name] and session.events == []
    session.append(name, {"reason": "ok"}, ignorable=True)
    assert [e.type for e in session.events] == [name]


def test_todos_and_standing_plan_follow_the_log() -> None:
    session = Session(HEADER, strict=True)
    session.append("turn/start", {"turn": 1})
    assert session.todos is None and session.standing_plan is None
    session.append("todo/write", {"todos": [{"content": "a", "status": "in_progress"}]})
    assert [t.content for t in session.todos or []] == ["a"]
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    assert session.standing_plan == session.todos
    session.append("turn/start", {"turn": 2})
    assert session.standing_plan is None and session.todos is not None
    session.append("todo/write", {"todos": []})
    assert session.todos == [] and session.standing_plan == []


def test_events_view_is_read_only_and_live() -> None:
    session = Session(HEADER)
    view = session.events
    session.append("turn/start", {"turn": 1})
    assert len(view) == 1
    with pytest.raises(TypeError):
        view[0] = None  # type: ignore[index]


def test_resume_from_stored_events_checks_them() -> None:
    b = LogBuilder()
    b.exchange("hi", "c1")
    resumed = Session(HEADER, b.events, strict=True)
    assert resumed.derive_messages() == derive_messages(b.events)
    broken = [*b.events[:2], *b.events[3:]]
    with pytest.raises((StructureError, InvalidEventError)):
        Session(HEADER, broken, strict=True)


@settings(max_examples=60, deadline=None)
@given(log_plans())
def test_incremental_views_equal_the_pure_fold_after_every_append(plan: Any) -> None:
    events, _slots = build_plan(plan, todo_slots=range(0, 1000, 3))
    session = Session(HEADER, strict=True, clock=iter(range(10**9)).__next__)
    for i, event in enumerate(events):
        session.append(
            event.type,
            event.data_copy(),
            surface_op=event.surface_op,
            source_event_seqs=event.source_event_seqs,
        )
        prefix = list(session.events)
        assert session.derive_messages() == derive_messages(events[: i + 1])
        assert session.todos == current_todos(prefix)
        assert session.standing_plan == standing_plan(prefix)


def test_derive_messages_snapshot_never_changes_after_later_appends_or_replaces() -> None:
    b = LogBuilder()
    b.exchange("first", "c1")
    session = Session(HEADER, b.events)
    before = session.derive_messages()
    frozen = list(before)
    b.turn_start()
    b.user("second")
    b.compact(b.surface[0], b.surface[2], "summary")
    for event in b.events[len(session.events) :]:
        session.append(
            event.type,
            event.data_copy(),
            surface_op=event.surface_op,
            source_event_seqs=event.source_event_seqs,
        )
    assert list(before) == frozen and len(before) == len(frozen)
    after = session.derive_messages()
    assert after == derive_messages(list(session.events)) and after != before
    assert after[0].content[0].text == "summary"  # type: ignore[union-attr]
    assert before[-1] == frozen[-1] and before[:2] == frozen[:2]
    with pytest.raises(IndexError):
        before[len(frozen)]
