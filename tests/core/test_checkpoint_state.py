"""Projection checkpoints, pure part: folding, the checkpoint text, and every way a stored
checkpoint is refused (issue #17; todo_sessions/core/checkpoint.py, docs/design.md,
"Checkpoints")."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from logs import T0, LogBuilder

from todo_sessions.core.checkpoint import (
    CHECKPOINT_FORMAT,
    CheckpointError,
    LiveState,
    fingerprint,
    fold,
)
from todo_sessions.core.envelope import SessionEvent
from todo_sessions.core.structure import StructureChecker
from todo_sessions.core.surface import SurfaceState
from todo_sessions.errors import InvalidEventError, StructureError


def a_log() -> LogBuilder:
    b = LogBuilder()
    b.exchange("hi", "c1")
    b.todo(("write tests", "pending"))
    b.turn_start()
    b.user("more")
    b.step_start()
    b.assistant(calls=["c2"])
    b.tool_call("c2")
    return b


def test_fingerprint_is_a_12_byte_blake2b_of_the_wire_text() -> None:
    event = SessionEvent("turn/start", 0, T0, {"turn": 1})
    expected = hashlib.blake2b(event.to_json().encode(), digest_size=12).hexdigest()
    assert fingerprint(event) == expected and len(expected) == 24
    assert fingerprint(event.replace(time=T0 + 1)) != expected


def test_an_empty_state() -> None:
    state = LiveState.empty()
    assert state.next_seq == 0
    assert (state.todos, state.standing, state.last_time) == (None, False, None)
    assert (state.last_fingerprint, state.last_event) == (None, None)
    assert state.structure.export() == StructureChecker().export()
    assert state.surface.export() == SurfaceState().export()
    assert not hasattr(state, "__dict__")
    with pytest.raises(AttributeError):
        state.colour = "red"  # type: ignore[attr-defined]
    head, nodes = state.encode().split("\n")
    assert nodes == "[]"
    assert json.loads(head) == {
        "format": 2,
        "nextSeq": 0,
        "lastTime": None,
        "lastEvent": None,
        "surface": {"order": [], "replacements": []},
        "nodes": "2:" + hashlib.blake2b(b"[]", digest_size=16).hexdigest(),
        "structure": StructureChecker().export(),
        "todos": None,
        "standing": False,
    }
    assert CHECKPOINT_FORMAT == 2


def test_apply_folds_events_in_order() -> None:
    b = a_log()
    state = LiveState.empty()
    for event in b.events:
        state.apply(event)
        assert state.next_seq == event.seq + 1
        assert (state.last_time, state.last_event) == (event.time, event)
    assert state.todos is not None and [t.content for t in state.todos] == ["write tests"]
    assert state.standing is False  # a turn started after the todo/write
    assert [c.call_id for c in state.structure.unanswered_calls()] == ["c2"]
    assert state.encode() == fold(b.events).encode()


def test_a_todo_write_is_the_standing_plan_until_the_next_turn() -> None:
    b = LogBuilder()
    b.turn_start()
    b.todo(("a", "pending"))
    state = fold(b.events)
    assert state.standing is True
    b.user("x")
    state.apply(b.events[-1])
    assert state.standing is True  # only a turn/start ends it
    b.turn_end()
    state.apply(b.events[-1])
    assert state.standing is True
    b.turn_start()
    state.apply(b.events[-1])
    assert state.standing is False
    assert state.todos is not None and state.todos[0].content == "a"


def test_an_event_out_of_order_is_refused() -> None:
    state = LiveState.empty()
    with pytest.raises(InvalidEventError) as info:
        state.apply(SessionEvent("turn/start", 3, T0, {"turn": 1}))
    assert str(info.value) == "event 'turn/start' has seq 3, expected 0"
    assert (info.value.event_type, info.value.seq, info.value.field) == ("turn/start", 3, "seq")
    assert state.next_seq == 0 and state.last_event is None


def test_an_invalid_event_is_refused_and_changes_nothing() -> None:
    state = LiveState.empty()
    before = state.encode()
    with pytest.raises(InvalidEventError) as info:
        state.apply(SessionEvent("turn/start", 0, T0, {"turn": 0}))
    assert info.value.field == "data.turn"
    bad_todo = SessionEvent("todo/write", 0, T0, {"todos": [{"content": "", "status": "x"}]})
    with pytest.raises(InvalidEventError):
        state.apply(bad_todo)
    assert state.encode() == before and state.last_time is None


def test_structure_is_checked_only_in_strict_mode() -> None:
    step = SessionEvent("step/start", 0, T0, {"turn": 1, "step": 1})
    strict = LiveState.empty()
    with pytest.raises(StructureError):
        strict.apply(step, check_structure=True)
    assert strict.next_seq == 0
    lenient = LiveState.empty()
    lenient.apply(step)
    assert lenient.next_seq == 1
    lenient_all = LiveState.empty()
    lenient_all.apply_all([step])
    with pytest.raises(StructureError):
        LiveState.empty().apply_all([step], check_structure=True)


def test_the_checkpoint_text_round_trips() -> None:
    b = a_log()
    state = fold(b.events)
    text = state.encode()
    head, nodes = text.split("\n")
    for line in (head, nodes):
        assert line == json.dumps(
            json.loads(line), ensure_ascii=False, separators=(",", ":"), allow_nan=False
        )
    wire = json.loads(head)
    assert wire["format"] == 2 and wire["nextSeq"] == len(b.events)
    assert [node["seq"] for node in json.loads(nodes)] == wire["surface"]["order"]
    assert wire["surface"]["order"] == list(state.surface.seqs) and len(state.surface) == 6
    assert wire["lastTime"] == b.events[-1].time
    assert wire["lastEvent"] == fingerprint(b.events[-1])
    assert wire["todos"] == [{"content": "write tests", "status": "pending"}]
    assert wire["standing"] is False
    again = LiveState.decode(text, seq=len(b.events))
    assert again.last_fingerprint == fingerprint(b.events[-1]) and again.last_event is None
    assert again.encode() == text  # with no last event, the stored fingerprint is kept
    assert again.matches(b.events[-1]) is True and again.last_event is b.events[-1]
    b.step_end()
    again.apply(b.events[-1])
    state.apply(b.events[-1])
    assert again.encode() == state.encode()


def test_a_checkpoint_matches_only_its_own_log() -> None:
    b = a_log()
    state = LiveState.decode(fold(b.events).encode(), seq=len(b.events))
    other = b.events[-1].replace(time=b.events[-1].time + 1)
    assert state.matches(other) is False and state.last_event is None
    assert state.matches(None) is False
    assert state.matches(b.events[-1]) is True


def test_a_standing_plan_survives_the_text() -> None:
    b = LogBuilder()
    b.turn_start()
    b.todo(("a", "in_progress"), ("b", "pending"))
    text = fold(b.events).encode()
    state = LiveState.decode(text, seq=2)
    assert state.standing is True and state.todos is not None
    assert [(t.content, t.status) for t in state.todos] == [("a", "in_progress"), ("b", "pending")]


def damaged(text: str, seq: int) -> str:
    with pytest.raises(CheckpointError) as info:
        LiveState.decode(text, seq=seq)
    assert isinstance(info.value, ValueError)
    return str(info.value)


def good(**changes: Any) -> str:
    b = LogBuilder()
    b.turn_start()
    b.todo(("a", "pending"))
    head, nodes = fold(b.events).encode().split("\n")
    wire = json.loads(head)
    wire.update(changes)
    return json.dumps(wire) + "\n" + nodes


def test_refused_checkpoints() -> None:
    assert damaged("{", 2).startswith("checkpoint at seq 2 is not JSON (invalid JSON: ")
    assert damaged(b"\xff".decode("latin-1"), 2).startswith("checkpoint at seq 2 is not JSON")
    assert damaged("[1]", 2) == "checkpoint at seq 2 is not a JSON object"
    for version in (1, 3, 0, -1, "2", "1", True, None, 2.0, 1.0):
        assert damaged(good(format=version), 2) == (
            f"checkpoint at seq 2 has format {version!r}; this version reads format 2"
        )
        with pytest.raises(CheckpointError) as info:
            LiveState.decode(good(format=version), seq=2)
        assert info.value.obsolete is (version == 1 and type(version) is int), version
    with pytest.raises(CheckpointError) as info:
        LiveState.decode("{", seq=2)
    assert info.value.obsolete is False
    assert damaged(good(nextSeq=3), 2) == "checkpoint at seq 2 holds the state at 2"
    assert damaged(good(), 3) == "checkpoint at seq 3 holds the state at 2"
    assert damaged(good(standing=1), 2) == ("checkpoint at seq 2 is damaged: bad standing/lastTime")
    assert damaged(good(lastTime=1.5), 2) == (
        "checkpoint at seq 2 is damaged: bad standing/lastTime"
    )
    assert damaged(good(lastTime="now"), 2) == (
        "checkpoint at seq 2 is damaged: bad standing/lastTime"
    )
    assert LiveState.decode(good(lastTime=None), seq=2).last_time is None
    nodes = good().split("\n")[1]
    for key in ("surface", "structure", "todos", "standing", "lastTime", "lastEvent"):
        wire = json.loads(good().split("\n")[0])
        del wire[key]
        assert damaged(json.dumps(wire) + "\n" + nodes, 2) == (
            f"checkpoint at seq 2 is damaged: {key!r}"
        )
    assert damaged(good(nodes=None), 2) == (
        "checkpoint at seq 2 is damaged: its surface nodes do not match their digest"
    )
    assert damaged(good().split("\n")[0], 2) == damaged(good(nodes=None), 2)
    message = damaged(good(todos=[{"content": "", "status": "pending"}]), 2)
    assert message.startswith("checkpoint at seq 2 is damaged: invalid todo/write (seq 2)")
    assert damaged(good(surface=[]), 2).startswith("checkpoint at seq 2 is damaged: ")


def test_fold_is_apply_all_from_empty() -> None:
    b = a_log()
    state = LiveState.empty()
    state.apply_all(b.events)
    assert fold(b.events).encode() == state.encode()
    assert fold([]).encode() == LiveState.empty().encode()


# -- advance: the lenient fold of a stored log (what the SDK adapters keep) --------------------


def _folded(state: LiveState) -> tuple[Any, ...]:
    return (
        state.next_seq,
        state.structure.export(),
        state.surface.export(),
        state.todos,
        state.standing,
        state.last_time,
        state.last_event,
    )


def test_advance_folds_a_valid_log_as_apply_does() -> None:
    b = a_log()
    b.tool_result("c2")
    b.step_end()
    b.compact(b.surface[0], b.surface[-1])
    b.turn_end()
    checked, lenient = LiveState.empty(), LiveState.empty(messages=False)
    for event in b.events:
        checked.apply(event)
        lenient.advance(event)
        assert _folded(lenient) == _folded(checked), event
    with pytest.raises(RuntimeError):
        lenient.surface.snapshot()  # no messages built


def test_advance_leaves_what_an_event_cannot_change_and_never_raises() -> None:
    b = a_log()
    surface_before = b.surface[:]
    todos_before = fold(b.events).todos
    bad_replace = SessionEvent(
        "user/message",
        b.next_seq,
        T0,
        {"id": "u", "role": "user", "content": [], "source": {"kind": "user"}},
        surface_op={"op": "replace", "start": 999, "end": 999},
        source_event_seqs=[999],
    )
    bad_todos = SessionEvent("todo/write", b.next_seq + 1, T0, {"todos": "not a list"})
    state = LiveState.empty(messages=False)
    for event in [*b.events, bad_replace, bad_todos]:
        state.advance(event)
    assert list(state.surface.seqs) == surface_before
    assert state.todos == todos_before and state.next_seq == b.next_seq + 2
    with pytest.raises(InvalidEventError):
        LiveState.empty().apply_all([*b.events, bad_replace])  # the checked fold refuses it


def test_call_place_names_the_open_turns_calls_only() -> None:
    b = a_log()  # turn 2, step 1: an assistant message calling c2, then its tool/call
    state = fold(b.events)
    assert state.structure.call_place("c2") == (2, 1)
    assert state.structure.call_place("c1") is None  # turn 1's call: its turn is closed
    assert state.structure.call_place("nope") is None
    b.tool_result("c2")
    b.step_end()
    b.turn_end()
    assert fold(b.events).structure.call_place("c2") is None
