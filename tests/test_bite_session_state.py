"""A live session started from a folded state, and the events it holds (session.py), with the
exact errors of a state that cannot be restored (core/structure.py, core/surface.py)."""

from __future__ import annotations

from typing import Any

import pytest
from logs import LogBuilder

from todo_sessions import Session, SessionEvent, SessionHeader, StructureError
from todo_sessions.core.checkpoint import LiveState, fold
from todo_sessions.core.structure import StructureChecker
from todo_sessions.core.surface import SurfaceState

HEADER = SessionHeader(id="state", created_at=1)


def log() -> list[Any]:
    b = LogBuilder()
    b.turn_start()
    b.user("go")
    b.step_start()
    b.assistant("calling", calls=["c1", "c2"])
    b.tool_call("c1")
    return b.events


def test_a_session_from_a_state_holds_nothing_before_it() -> None:
    events = log()
    state = fold(events)
    session = Session(HEADER, state=state, clock=lambda: 9)
    assert session.checkpoint_state() is state
    assert (session.next_seq, session.first_held_seq, list(session.events)) == (5, 5, [])
    assert session.open_turn == 1 and session.open_step == 1 and session.last_turn == 1
    assert [c.call_id for c in session.unanswered_calls()] == ["c1", "c2"]
    result = session.append("step/end", {"turn": 1, "step": 1})
    assert result.seq == 5 and session.events_from(5) == [result]
    assert session.open_step is None
    with pytest.raises(ValueError, match=r"no longer holds seq 4 \(it holds 5 on\)"):
        session.events_from(4)


def test_events_continue_a_state() -> None:
    events = log()
    session = Session(HEADER, events[3:], state=fold(events[:3]))
    assert session.first_held_seq == 3
    assert list(session.events) == events[3:]
    assert session.events_from(4) == events[4:]
    assert session.events_from(3) == events[3:]


def test_release_stored_drops_only_what_is_below() -> None:
    events = log()
    session = Session(HEADER, events)
    session.release_stored(0)
    assert session.first_held_seq == 0 and len(session.events) == 5
    session.release_stored(2)
    assert session.first_held_seq == 2 and list(session.events) == events[2:]
    session.release_stored(1)  # already gone: nothing changes
    assert session.first_held_seq == 2 and len(session.events) == 3
    session.release_stored(99)  # past the end: everything held goes, nothing more
    assert session.first_held_seq == 5 and list(session.events) == []
    assert session.next_seq == 5  # the projections do not need the events
    assert session.open_turn == 1 and session.last_turn == 1


def test_a_session_turn_numbering_comes_from_the_state() -> None:
    b = LogBuilder()
    b.turn_start()
    b.turn_end()
    b.turn_start()
    session = Session(HEADER, state=fold(b.events))
    assert session.last_turn == 2 and session.open_turn == 2 and session.open_step is None


def test_apply_all_does_not_check_structure_unless_asked() -> None:
    stray = [SessionEvent("step/start", 0, 1, {"turn": 1, "step": 1})]  # outside any turn
    LiveState.empty().apply_all(stray)
    with pytest.raises(StructureError):
        LiveState.empty().apply_all(stray, check_structure=True)


_STATE = {
    "nextSeq": 3,
    "openTurn": 1,
    "openStep": None,
    "lastTurn": 1,
    "lastStep": 0,
    "calls": [["c1", "read", 1, 1, None, None, False]],
}


def test_structure_restore_takes_none_only_where_export_writes_it() -> None:
    restored = StructureChecker.restore(_STATE)
    assert restored.unanswered_calls()[0].call_seq is None
    with pytest.raises(ValueError, match=r"expected int, got None"):
        StructureChecker.restore({**_STATE, "lastTurn": None})
    with pytest.raises(ValueError, match=r"expected str, got 5"):
        StructureChecker.restore({**_STATE, "calls": [[5, "read", 1, 1, None, None, False]]})
    with pytest.raises(ValueError, match=r"expected bool, got 0"):
        StructureChecker.restore({**_STATE, "calls": [["c1", "read", 1, 1, None, None, 0]]})
    with pytest.raises(ValueError, match=r"expected int, got None"):
        StructureChecker.restore({**_STATE, "calls": [["c1", "read", 1, None, None, None, 0]]})


def test_surface_restore_names_what_is_wrong() -> None:
    with pytest.raises(ValueError, match=r"replacement \[1, 1, 1, '2'\] is not made of seqs"):
        SurfaceState.restore({"order": [], "replacements": [[1, 1, 1, ["2"]]]}, "[]")
    with pytest.raises(ValueError, match=r"not a surface state: KeyError\('order'\)"):
        SurfaceState.restore({"replacements": []}, "[]")
