"""The live state and its checkpoint text (core/checkpoint.py), and the export/restore of the
surface and the turn/step state it is made of. Pure: no store."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from logs import LogBuilder, build_plan, log_plans, rewritten_checkpoint

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
    head, nodes = text.split("\n")
    wire = json.loads(head)
    assert wire["format"] == CHECKPOINT_FORMAT == 2
    assert wire["nextSeq"] == len(events) and wire["lastTime"] == events[-1].time
    assert wire["lastEvent"] == fingerprint(events[-1])
    assert wire["standing"] is True
    assert wire["todos"] == [
        {"content": "read", "status": "in_progress"},
        {"content": "fix", "status": "pending"},
    ]
    assert head == json.dumps(wire, separators=(",", ":"), ensure_ascii=False)
    assert wire["surface"] == {"order": [1, 4, 6], "replacements": []}
    assert [n["seq"] for n in json.loads(nodes)] == [1, 4, 6]
    assert nodes == json.dumps(json.loads(nodes), separators=(",", ":"), ensure_ascii=False)
    digest = hashlib.blake2b(nodes.encode(), digest_size=16).hexdigest()
    assert wire["nodes"] == f"{len(nodes)}:{digest}"
    # a decoded state that has not met its event yet writes the fingerprint it read
    assert LiveState.decode(text, seq=len(events)).encode() == text


def test_node_citations_are_not_carried() -> None:
    b = LogBuilder()
    b.turn_start()
    b.step_start()
    first = b.chunk("a").seq
    b.assistant("answer", cites=[first])
    state = fold(b.events)
    [node] = json.loads(state.encode().split("\n")[1])
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
        ('{"format": 3}', "has format 3"),
        ('{"format": true}', "has format True"),
        ('{"format": "2"}', "has format '2'"),
        ('{"format": 1}', "has format 1"),
        ('{"format": 2}', "is damaged: its surface nodes do not match their digest"),
        ('{"format": 2, "nodes": "2:x"}\n[]', "is damaged: its surface nodes do not match"),
    ],
)
def test_text_that_cannot_be_used_is_a_checkpoint_error(text: str, problem: str) -> None:
    with pytest.raises(CheckpointError, match=f"checkpoint at seq 3 {problem}"):
        LiveState.decode(text, seq=3)


def _tamper(key: str, value: Any, *path: str) -> str:
    head, nodes = fold(built()).encode().split("\n")
    wire = json.loads(head)
    target = wire
    for part in path:
        target = target[part]
    target[key] = value
    return json.dumps(wire) + "\n" + nodes


@pytest.mark.parametrize(
    ("key", "value", "path"),
    [
        ("standing", 1, ()),
        ("lastTime", "now", ()),
        ("todos", [{"content": "x"}], ()),
        ("nextSeq", 3, ("structure",)),
        ("openTurn", True, ("structure",)),
        ("calls", [["c1", "t", 1, 1, None, None, "no"]], ("structure",)),
        ("order", [1, 1, 6], ("surface",)),
        ("order", [1, "4", 6], ("surface",)),
        ("order", None, ("surface",)),
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
    head, nodes = text.split("\n")
    wire = json.loads(head)
    wire["nextSeq"] = 5
    with pytest.raises(CheckpointError, match="holds the state at 4"):
        LiveState.decode(json.dumps(wire) + "\n" + nodes, seq=5)


def test_nodes_that_do_not_match_their_digest_are_refused_at_once() -> None:
    text = fold(built()).encode()
    edited = text.replace('"fix it"', '"fix IT"')
    assert edited != text
    with pytest.raises(CheckpointError, match="do not match their digest"):
        LiveState.decode(edited, seq=7)
    with pytest.raises(CheckpointError, match="do not match their digest"):
        LiveState.decode(text + "\n", seq=7)


@pytest.mark.parametrize(
    ("nodes", "problem"),
    [
        ("[oops]", "surface nodes are not JSON"),
        ("[1,2,3]", "surface node 1 is damaged"),
        ("[{}]", "do not match the surface order"),
    ],
)
def test_nodes_are_decoded_when_first_needed(nodes: str, problem: str) -> None:
    """The nodes' text is checked against its digest on decode but parsed only when the
    messages are needed: resuming does not pay for the history. Nodes rewritten with their
    digest fail then, with a `CheckpointError`, and leave the state as it was."""
    events = built()
    state = LiveState.decode(rewritten_checkpoint(fold(events).encode(), nodes=nodes), seq=7)
    assert state.surface.seqs == (1, 4, 6) and state.todos == current_todos(events)
    with pytest.raises(CheckpointError, match=problem):
        state.surface.snapshot()
    replace = SessionEvent(
        "user/message",
        7,
        1,
        {"id": "s", "role": "user", "content": [{"type": "text", "text": "s"}],
         "source": {"kind": "user"}},
        surface_op=SurfaceReplace(1, 4),
        source_event_seqs=[1, 4],
    )  # fmt: skip
    with pytest.raises(CheckpointError, match=problem):
        state.apply(replace)
    assert state.next_seq == 7 and state.surface.seqs == (1, 4, 6)


def test_a_node_in_the_wrong_place_is_damage() -> None:
    text = fold(built()).encode()
    nodes = json.loads(text.split("\n")[1])
    swapped = json.dumps(nodes[::-1], separators=(",", ":"))
    state = LiveState.decode(rewritten_checkpoint(text, nodes=swapped), seq=7)
    with pytest.raises(CheckpointError, match="node 6 stands where the order has 1"):
        state.surface.snapshot()


def test_appends_after_a_restore_keep_the_restored_text() -> None:
    """A restored surface that only grew writes its restored nodes back as they came, and
    decodes them only when the messages are asked for."""
    b = LogBuilder()
    b.turn_start()
    b.user("one")
    b.user("two")
    cut = len(b.events)
    b.user("three")
    whole = fold(b.events)
    state = LiveState.decode(fold(b.events[:cut]).encode(), seq=cut)
    state.apply_all(b.events[cut:])
    assert state.encode() == whole.encode()
    assert list(state.surface.snapshot()) == list(whole.surface.snapshot())
    assert [m.content[0].text for m in state.surface.snapshot()] == ["one", "two", "three"]


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
    again = SurfaceState.restore(surface.export(), surface.export_nodes())
    assert again.seqs == surface.seqs and again.replacements == surface.replacements
    assert again.export() == surface.export()
    assert again.export_nodes() == surface.export_nodes()
    assert list(again.snapshot()) == list(surface.snapshot())


@pytest.mark.parametrize(
    ("broken", "nodes"),
    [
        ({"order": []}, "[]"),
        ({"replacements": []}, "[]"),
        ({"order": ["1"], "replacements": []}, "[{}]"),
        ({"order": [], "replacements": [[1, 1, 1, ["2"]]]}, "[]"),
        ({"order": [], "replacements": [[1, 1]]}, "[]"),
        ({"order": [], "replacements": []}, "[{}]"),
        ({"order": [1], "replacements": []}, "{}"),
        ({"order": [1], "replacements": []}, None),
    ],
)  # fmt: skip
def test_surface_restore_refuses_what_export_never_writes(
    broken: dict[str, Any], nodes: Any
) -> None:
    with pytest.raises(ValueError):
        SurfaceState.restore(broken, nodes)


def test_surface_restore_refuses_a_node_twice() -> None:
    with pytest.raises(ValueError, match="seq 3 is on the surface twice"):
        SurfaceState.restore({"order": [3, 3], "replacements": []}, "[{},{}]")
