"""The live state and its checkpoint text (core/checkpoint.py), and the export/restore of the
surface and the turn/step state it is made of. Pure: no store."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from logs import LogBuilder, build_plan, log_plans

from todo_sessions.core.checkpoint import (
    CHECKPOINT_FORMAT,
    CheckpointError,
    LiveState,
    fingerprint,
    fold,
)
from todo_sessions.core.envelope import SessionEvent, SurfaceReplace
from todo_sessions.core.repair import closers_for, interrupted_turn_closers
from todo_sessions.core.structure import StructureChecker
from todo_sessions.core.surface import SurfaceState, derive_messages
from todo_sessions.core.todos import current_todos
from todo_sessions.errors import InvalidEventError, StructureError


def built() -> list[SessionEvent]:
    b = LogBuilder()
    b.turn_start()
    b.user("fix it")
    b.todo(("read", "in_progress"), ("fix", "pending"))
    b.step_start()
    b.assistant("looking", calls=["c1", "c2"])
    b.tool_call("c1")
    b.tool_result("c1")
    return b.events


def decoded(state: LiveState) -> LiveState:
    return LiveState.decode(state.encode(), seq=state.next_seq)


def test_an_empty_state() -> None:
    state = LiveState.empty()
    assert not hasattr(state, "__dict__")  # slots: one per live session, kept small
    assert (state.next_seq, state.todos, state.standing, state.last_time) == (0, None, False, None)
    assert state.last_event is None and state.last_fingerprint is None
    assert list(state.surface.snapshot()) == []


def test_the_fold_keeps_what_a_live_session_needs() -> None:
    events = built()
    state = fold(events)
    assert state.next_seq == len(events)
    assert state.last_event is events[-1] and state.last_time == events[-1].time
    assert state.todos == current_todos(events) and state.standing is True
    assert list(state.surface.snapshot()) == derive_messages(events)
    assert [c.call_id for c in state.structure.unanswered_calls()] == ["c2"]
    assert state.structure.open_turn == 1 and state.structure.open_step == 1


def test_a_new_turn_ends_the_standing_plan_but_keeps_the_todos() -> None:
    b = LogBuilder()
    b.turn_start()
    b.todo(("a", "pending"))
    b.turn_end()
    state = fold(b.events)
    assert state.standing is True
    b.turn_start()
    state.apply(b.events[-1])
    assert state.standing is False and state.todos is not None


def test_apply_refuses_a_wrong_seq_and_changes_nothing() -> None:
    events = built()
    state = fold(events[:3])
    before = state.encode()
    with pytest.raises(InvalidEventError) as info:
        state.apply(events[4])
    assert (info.value.seq, info.value.field) == (4, "seq")
    assert "has seq 4, expected 3" in str(info.value)
    assert state.encode() == before


def test_apply_checks_structure_only_when_asked() -> None:
    stray = SessionEvent("step/start", 0, 1, {"turn": 1, "step": 1})
    with pytest.raises(StructureError):
        LiveState.empty().apply(stray, check_structure=True)
    lenient = LiveState.empty()
    lenient.apply(stray)
    assert lenient.next_seq == 1


def test_an_invalid_payload_is_refused() -> None:
    with pytest.raises(InvalidEventError):
        LiveState.empty().apply(SessionEvent("turn/start", 0, 1, {"turn": "one"}))


@settings(max_examples=60, deadline=None)
@given(plan=log_plans(max_turns=4), slots=st.sets(st.integers(0, 40)), cut=st.integers(0, 200))
def test_a_checkpoint_continues_exactly_like_the_fold(plan: Any, slots: set[int], cut: int) -> None:
    events, _ = build_plan(plan, slots)
    cut = min(cut, len(events))
    if cut == 0:
        return
    resumed = LiveState.decode(fold(events[:cut]).encode(), seq=cut)
    assert resumed.matches(events[cut - 1])
    resumed.apply_all(events[cut:])
    whole = fold(events)
    assert resumed.encode() == whole.encode()
    assert list(resumed.surface.snapshot()) == list(whole.surface.snapshot())
    assert resumed.todos == whole.todos and resumed.standing == whole.standing
    assert resumed.structure.unanswered_calls() == whole.structure.unanswered_calls()
    if events:
        assert closers_for(
            resumed.structure, last_time=events[-1].time, session_id="s"
        ) == interrupted_turn_closers(events, session_id="s")


def test_the_text_is_canonical_and_names_the_event_before_it() -> None:
    events = built()
    state = fold(events)
    text = state.encode()
    wire = json.loads(text)
    assert wire["format"] == CHECKPOINT_FORMAT == 1
    assert wire["nextSeq"] == len(events) and wire["lastTime"] == events[-1].time
    assert wire["lastEvent"] == fingerprint(events[-1])
    assert wire["standing"] is True
    assert wire["todos"] == [
        {"content": "read", "status": "in_progress"},
        {"content": "fix", "status": "pending"},
    ]
    assert text == json.dumps(wire, separators=(",", ":"), ensure_ascii=False)
    # a decoded state that has not met its event yet writes the fingerprint it read
    assert LiveState.decode(text, seq=len(events)).encode() == text


def test_node_citations_are_not_carried() -> None:
    b = LogBuilder()
    b.turn_start()
    b.step_start()
    first = b.chunk("a").seq
    b.assistant("answer", cites=[first])
    state = fold(b.events)
    [node] = json.loads(state.encode())["surface"]["nodes"]
    assert "sourceEventSeqs" not in node and node["seq"] == b.events[-1].seq
    assert b.events[-1].source_event_seqs == (first,)  # the event itself keeps them


def test_fingerprints_tell_events_apart() -> None:
    a = SessionEvent("turn/start", 0, 1, {"turn": 1})
    assert fingerprint(a) == fingerprint(SessionEvent("turn/start", 0, 1, {"turn": 1}))
    assert fingerprint(a) != fingerprint(SessionEvent("turn/start", 0, 2, {"turn": 1}))
    assert len(fingerprint(a)) == 24


def test_matches_needs_the_very_event_before_it() -> None:
    events = built()
    state = LiveState.decode(fold(events[:4]).encode(), seq=4)
    assert state.matches(None) is False
    assert state.matches(events[2]) is False
    assert state.last_event is None
    assert state.matches(events[3])
    assert state.last_event is events[3]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{oops", "is not JSON"),
        ("[1]", "is not a JSON object"),
        ('{"format": 2}', "has format 2"),
        ('{"format": true}', "has format True"),
        ('{"format": "1"}', "has format '1'"),
        ('{"format": 1}', "is damaged"),
    ],
)
def test_text_that_cannot_be_used_is_a_checkpoint_error(text: str, problem: str) -> None:
    with pytest.raises(CheckpointError, match=f"checkpoint at seq 3 {problem}"):
        LiveState.decode(text, seq=3)


def _tamper(key: str, value: Any, *path: str) -> str:
    wire = json.loads(fold(built()).encode())
    target = wire
    for part in path:
        target = target[part]
    target[key] = value
    return json.dumps(wire)


@pytest.mark.parametrize(
    ("key", "value", "path"),
    [
        ("standing", 1, ()),
        ("lastTime", "now", ()),
        ("todos", [{"content": "x"}], ()),
        ("nextSeq", 3, ("structure",)),
        ("openTurn", True, ("structure",)),
        ("calls", [["c1", "t", 1, 1, None, None, "no"]], ("structure",)),
        ("nodes", [{"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}}], ("surface",)),
        ("replacements", [[1, 2, "x", []]], ("surface",)),
    ],
)
def test_a_damaged_part_is_a_checkpoint_error(key: str, value: Any, path: tuple[str, ...]) -> None:
    seq = len(built())
    with pytest.raises(CheckpointError, match=f"checkpoint at seq {seq}"):
        LiveState.decode(_tamper(key, value, *path), seq=seq)


def test_a_state_for_another_seq_is_refused() -> None:
    text = fold(built()[:4]).encode()
    with pytest.raises(CheckpointError, match="checkpoint at seq 5 holds the state at 4"):
        LiveState.decode(text, seq=5)
    wire = json.loads(text)
    wire["nextSeq"] = 5
    with pytest.raises(CheckpointError, match="holds the state at 4"):
        LiveState.decode(json.dumps(wire), seq=5)


# -- the parts ----------------------------------------------------------------------------------


def test_structure_export_round_trips() -> None:
    state = fold(built()).structure
    exported = state.export()
    assert exported == {
        "nextSeq": 7,
        "openTurn": 1,
        "openStep": 1,
        "lastTurn": 1,
        "lastStep": 1,
        "calls": [["c1", "read", 1, 1, 5, 4, True], ["c2", "read", 1, 1, None, 4, False]],
    }
    again = StructureChecker.restore(exported)
    assert again.export() == exported
    assert again.unanswered_calls() == state.unanswered_calls()
    assert again.last_turn == 1


def test_structure_restore_keeps_the_latest_call_of_an_id() -> None:
    exported = {
        "nextSeq": 9,
        "openTurn": 1,
        "openStep": 2,
        "lastTurn": 1,
        "lastStep": 2,
        "calls": [["c1", "a", 1, 1, 3, 2, True], ["c1", "a", 1, 2, 8, 7, False]],
    }
    restored = StructureChecker.restore(exported)
    restored.advance(
        SessionEvent(
            "tool/result",
            9,
            1,
            {"turn": 1, "step": 2, "message": {"source": {"callId": "c1"}}},
        )
    )
    assert restored.unanswered_calls() == ()  # the result answered the second call


_EMPTY_STRUCTURE = {
    "nextSeq": 0,
    "openTurn": None,
    "openStep": None,
    "lastTurn": 0,
    "lastStep": 0,
    "calls": [],
}


@pytest.mark.parametrize(
    "broken",
    [
        {},
        {**_EMPTY_STRUCTURE, "nextSeq": "0"},
        {**_EMPTY_STRUCTURE, "lastTurn": True},
        {**_EMPTY_STRUCTURE, "calls": [[1]]},
        {**_EMPTY_STRUCTURE, "calls": 5},
    ],
)
def test_structure_restore_refuses_what_export_never_writes(broken: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="not a structure state"):
        StructureChecker.restore(broken)


def test_surface_export_round_trips_with_replacements() -> None:
    b = LogBuilder()
    b.turn_start()
    first = b.user("one").seq
    b.user("two")
    b.events.append(
        SessionEvent(
            "user/message",
            len(b.events),
            1,
            {
                "id": "sum",
                "role": "user",
                "content": [{"type": "text", "text": "summary"}],
                "source": {"kind": "user"},
            },
            surface_op=SurfaceReplace(first, first + 1),
            source_event_seqs=[first, first + 1],
        )
    )
    surface = SurfaceState()
    for event in b.events:
        surface.apply(event)
    again = SurfaceState.restore(surface.export())
    assert list(again.snapshot()) == list(surface.snapshot())
    assert again.seqs == surface.seqs and again.replacements == surface.replacements
    assert again.export() == surface.export()


@pytest.mark.parametrize(
    "broken",
    [
        {"nodes": []},
        {"replacements": []},
        {"nodes": [{"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}}],
         "replacements": []},
        {"nodes": [], "replacements": [[1, 1, 1, ["2"]]]},
        {"nodes": [], "replacements": [[1, 1]]},
    ],
)  # fmt: skip
def test_surface_restore_refuses_what_export_never_writes(broken: dict[str, Any]) -> None:
    with pytest.raises((ValueError, InvalidEventError)):
        SurfaceState.restore(broken)


def test_surface_restore_refuses_a_node_twice() -> None:
    b = LogBuilder()
    b.user("one")
    node = SurfaceState()
    node.apply(b.events[0])
    nodes = node.export()["nodes"] * 2
    with pytest.raises(ValueError, match="cannot be a surface node here"):
        SurfaceState.restore({"nodes": nodes, "replacements": []})
