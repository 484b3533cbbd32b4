"""The events a live Session holds: all of them, or from a checkpoint's seq on, and what the
owner released (issue #17; Session.first_held_seq, events_from, release_stored)."""

from __future__ import annotations

import pytest

from todo_sessions import Session
from todo_sessions.core.checkpoint import fold
from todo_sessions.core.header import SessionHeader

HEADER = SessionHeader(id="held", created_at=0)


def four_events() -> Session:
    session = Session(HEADER, clock=lambda: 7)
    session.append("turn/start", {"turn": 1})
    session.append("todo/write", {"todos": []})
    session.append("request/context", {})
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    return session


def test_a_new_session_holds_everything() -> None:
    session = four_events()
    assert session.first_held_seq == 0 and session.next_seq == 4
    assert [e.seq for e in session.events_from(0)] == [0, 1, 2, 3]
    assert [e.seq for e in session.events_from(3)] == [3]
    assert session.events_from(4) == []


def test_released_events_are_gone_and_asking_for_them_fails() -> None:
    session = four_events()
    session.release_stored(2)
    assert session.first_held_seq == 2 and session.next_seq == 4
    assert [e.seq for e in session.events] == [2, 3]
    assert [e.seq for e in session.events_from(2)] == [2, 3]
    assert [e.seq for e in session.events_from(3)] == [3]
    with pytest.raises(ValueError) as info:
        session.events_from(1)
    assert str(info.value) == "session 'held' no longer holds seq 1 (it holds 2 on)"
    session.release_stored(1)  # below what is held: nothing
    assert session.first_held_seq == 2 and len(session.events) == 2
    session.release_stored(2)
    assert session.first_held_seq == 2 and len(session.events) == 2
    session.release_stored(10)  # past the end: everything held
    assert session.first_held_seq == 4 and list(session.events) == []
    event = session.append("turn/start", {"turn": 2})
    assert event.seq == 4 and [e.seq for e in session.events_from(4)] == [4]


def test_a_session_started_from_a_state_holds_only_what_follows() -> None:
    source = four_events()
    state = fold(source.events)
    session = Session(HEADER, state=state, clock=lambda: 9)
    assert session.checkpoint_state() is state
    assert session.first_held_seq == 4 and session.next_seq == 4
    assert list(session.events) == [] and session.events_from(4) == []
    with pytest.raises(ValueError):
        session.events_from(3)
    event = session.append("turn/start", {"turn": 2})
    assert event.seq == 4 and session.checkpoint_state().next_seq == 5
    assert session.todos == [] and session.last_turn == 2
