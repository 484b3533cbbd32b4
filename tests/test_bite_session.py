"""The live `Session`: defaults, error details, the events view (issue #17)."""

from __future__ import annotations

import logging
import time

import pytest

from todo_sessions import InvalidEventError, Session, SessionEvent, SessionHeader
from todo_sessions._session import wall_clock_ms

HEADER = SessionHeader(id="bite", created_at=0)


def test_defaults() -> None:
    session = Session(HEADER, clock=lambda: 5)
    assert session.id == "bite"
    assert session.strict is False
    session.append("todo/write", {"todos": []})  # not strict: outside a turn is fine
    event = session.append("turn/start", {"turn": 1})
    assert (event.ignorable, event.surface_op, event.source_event_seqs) == (False, None, None)
    assert event.time == 5
    assert repr(session) == "Session('bite', events=2, strict=False)"
    assert repr(Session(HEADER, strict=True)) == "Session('bite', events=0, strict=True)"


def test_the_wall_clock_is_in_milliseconds() -> None:
    before = time.time_ns() // 1_000_000
    now = wall_clock_ms()
    after = time.time_ns() // 1_000_000
    assert isinstance(now, int)
    assert before <= now <= after


def test_an_invalid_payload_is_refused_before_anything_else() -> None:
    session = Session(HEADER)
    with pytest.raises(InvalidEventError) as info:
        session.append("turn/start", {"turn": "one"})
    error = info.value
    assert (error.event_type, error.seq, error.field) == ("turn/start", 0, "data.turn")
    assert "'turn/start' (seq 0)" in str(error)
    with pytest.raises(InvalidEventError) as unknown:
        session.append("mystery", {})
    assert (unknown.value.event_type, unknown.value.seq) == ("mystery", 0)
    assert "'mystery' (seq 0)" in str(unknown.value)
    assert len(session.events) == 0 and session.open_turn is None


def test_stored_events_are_validated_on_resume() -> None:
    bad = SessionEvent("turn/start", 0, 0, {"turn": 0})
    with pytest.raises(InvalidEventError) as info:
        Session(HEADER, [bad])
    assert (info.value.event_type, info.value.seq, info.value.field) == (
        "turn/start",
        0,
        "data.turn",
    )


def test_a_stored_event_with_the_wrong_seq_is_refused() -> None:
    first = SessionEvent("turn/start", 0, 0, {"turn": 1})
    gap = SessionEvent("todo/write", 2, 0, {"todos": []})
    with pytest.raises(InvalidEventError) as info:
        Session(HEADER, [first, gap])
    error = info.value
    assert str(error) == "event 'todo/write' has seq 2, expected 1"
    assert (error.event_type, error.seq, error.field) == ("todo/write", 2, "seq")


def test_a_surface_event_without_surface_op_names_itself() -> None:
    session = Session(HEADER)
    data = {"id": "m", "role": "user", "content": [], "source": {"kind": "user"}}
    with pytest.raises(InvalidEventError) as info:
        session.append("user/message", data)
    assert str(info.value) == (
        "event 'user/message' (seq 0) is surface-eligible and requires a surfaceOp marker "
        '("append" or a replace)'
    )
    assert (info.value.event_type, info.value.seq, info.value.field) == (
        "user/message",
        0,
        "surfaceOp",
    )


def test_a_todo_write_error_names_its_seq() -> None:
    session = Session(HEADER)
    session.append("turn/start", {"turn": 1})
    with pytest.raises(InvalidEventError) as info:
        session.append("todo/write", {"todos": [{"content": " ", "status": "pending"}]})
    assert "(seq 1)" in str(info.value)
    assert (info.value.event_type, info.value.seq) == ("todo/write", 1)


def test_a_failing_subscriber_is_logged_by_the_session_logger(
    caplog: pytest.LogCaptureFixture,
) -> None:
    session = Session(HEADER)

    def boom(event: SessionEvent) -> None:
        raise RuntimeError("subscriber bug")

    session.subscribe(boom)
    with caplog.at_level(logging.ERROR):
        session.append("turn/start", {"turn": 1})
    (record,) = caplog.records
    assert record.name == "todo_sessions.session"
    assert record.levelno == logging.ERROR
    assert record.getMessage().startswith("session 'bite': subscriber ")
    assert record.getMessage().endswith("failed on seq 0 (the event stays committed)")
    assert record.exc_info is not None and "subscriber bug" in str(record.exc_info[1])


def test_the_events_view() -> None:
    session = Session(HEADER)
    first = session.append("turn/start", {"turn": 1})
    second = session.append("todo/write", {"todos": []})
    view = session.events
    assert repr(view) == "<2 events>"
    assert view == [first, second]
    assert view == (first, second)
    assert view != [first]
    assert view != [second, first]
    assert (view == [first]) is False
    assert view != "ab"
    assert (view == 3) is False and (view == None) is False  # noqa: E711
    assert view[0] is first and view[-1] is second
    assert view[0:2] == (first, second) and isinstance(view[0:2], tuple)
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    assert len(view) == 3 and repr(view) == "<3 events>"
