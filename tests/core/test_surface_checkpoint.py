"""A surface exported for a checkpoint and restored from it folds on exactly like the original,
and a state that is not one is refused (issue #17; SurfaceState.export/export_nodes/restore)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from logs import LogBuilder

from todo_sessions.core.envelope import SessionEvent
from todo_sessions.core.surface import Replacement, SurfaceState
from todo_sessions.errors import CheckpointError, InvalidEventError


def surface_log() -> LogBuilder:
    b = LogBuilder()
    b.exchange("first", "c1")
    b.turn_start()
    b.user("second")
    b.compact(b.surface[0], b.surface[2], "summary")
    return b


def folded(b: LogBuilder) -> SurfaceState:
    state = SurfaceState()
    for event in b.events:
        state.apply(event)
    return state


def restored_from(state: SurfaceState) -> SurfaceState:
    return SurfaceState.restore(state.export(), state.export_nodes())


def test_export_holds_the_order_the_replacements_and_the_nodes_without_citations() -> None:
    b = surface_log()
    state = folded(b)
    exported = state.export()
    nodes = json.loads(state.export_nodes())
    assert exported["order"] == [node["seq"] for node in nodes] == list(state.seqs)
    for node in nodes:
        event = b.events[node["seq"]].to_dict()
        event.pop("sourceEventSeqs", None)
        assert node == event
    assert state.export_nodes() == json.dumps(nodes, separators=(",", ":"), ensure_ascii=False)
    (replacement,) = state.replacements
    assert exported["replacements"] == [
        [replacement.seq, replacement.start, replacement.end, list(replacement.removed)]
    ]
    assert SurfaceState().export() == {"order": [], "replacements": []}
    assert SurfaceState().export_nodes() == "[]"
    assert state.export_nodes() == state.export_nodes()  # kept texts give the same again


def test_a_restored_surface_is_the_same_and_folds_on_the_same() -> None:
    b = surface_log()
    state = folded(b)
    restored = restored_from(state)
    assert restored.export() == state.export()
    assert restored.export_nodes() == state.export_nodes()
    assert restored.seqs == state.seqs
    assert restored.replacements == state.replacements
    assert all(seq in restored for seq in state.seqs)
    b.step_start()
    b.assistant("more", cites=[])
    for surface in (state, restored):
        surface.apply(b.events[-2])
        surface.apply(b.events[-1])
    assert restored.export() == state.export()
    assert restored.export_nodes() == state.export_nodes()  # before the nodes are decoded
    assert restored.messages() == state.messages()
    assert restored.snapshot() == state.snapshot()
    assert restored.export_nodes() == state.export_nodes()  # and after


def test_a_replace_after_a_restore_folds_like_the_original() -> None:
    b = surface_log()
    state = folded(b)
    restored = restored_from(state)
    b.turn_start()
    b.compact(b.surface[-2], b.surface[-1], "shorter")
    for surface in (state, restored):
        surface.apply(b.events[-2])
        surface.apply(b.events[-1])
    assert restored.seqs == state.seqs and restored.replacements == state.replacements
    assert restored.export_nodes() == state.export_nodes()
    assert restored.messages() == state.messages()


def test_a_restored_surface_keeps_its_rules() -> None:
    b = surface_log()
    restored = restored_from(folded(b))
    first = restored.seqs[0]
    assert first != 0
    b.user("again", surface_op={"op": "replace", "start": first, "end": first}, cites=[0])
    with pytest.raises(InvalidEventError) as info:
        restored.apply(b.events[-1])
    assert info.value.field == "sourceEventSeqs"
    b.user("twice", surface_op="append")
    twice = b.events[-1].replace(seq=first)
    with pytest.raises(InvalidEventError, match=f"seq {first} is already on the surface"):
        restored.apply(twice)


def state_of(order: Any, replacements: Any = ()) -> dict[str, Any]:
    return {"order": order, "replacements": list(replacements)}


def test_states_that_are_not_a_surface_are_refused() -> None:
    b = surface_log()
    nodes = folded(b).export_nodes()
    order = folded(b).export()["order"]
    cases: list[tuple[Any, str, str]] = [
        ({"replacements": []}, nodes, "not a surface state: KeyError('order')"),
        ({"order": order}, nodes, "not a surface state: KeyError('replacements')"),
        (state_of(5), nodes, "the surface order is not a list of seqs"),
        (state_of([1, "2"]), nodes, "the surface order is not a list of seqs"),
        (state_of([1, 1]), nodes, "seq 1 is on the surface twice"),
        (state_of(order, [[1, 0, "2", []]]), nodes, "replacement [1, 0, '2'] is not made of seqs"),
        (state_of(order, [[1, 0, 2, [True]]]), nodes, "replacement [1, 0, 2, True] is not made"),
        (state_of(order, [[1, 0, 2]]), nodes, "not enough values to unpack (expected 4, got 3)"),
        (state_of(order), "{}", "the surface nodes are not a JSON array"),
        (state_of(order), "[{}", "the surface nodes are not a JSON array"),
        (state_of(order), "{}]", "the surface nodes are not a JSON array"),
        (state_of(order), None, "the surface nodes are not a JSON array"),
        (state_of([]), nodes, "0 surface seqs, but the nodes are '[{"),
        (state_of(order), "[]", f"{len(order)} surface seqs, but the nodes are '[]'"),
    ]
    for state, text, message in cases:
        with pytest.raises(ValueError) as info:
            SurfaceState.restore(state, text)
        assert str(info.value).startswith(message), (state, str(info.value))
    restored = SurfaceState.restore(state_of(order, [[9, 1, 2, [1, 2]]]), nodes)
    assert restored.replacements == (Replacement(9, 1, 2, (1, 2)),)


def test_nodes_that_are_not_the_order_fail_when_decoded() -> None:
    b = surface_log()
    order = folded(b).export()["order"]
    not_on_surface = json.dumps([b.events[0].to_dict()])  # turn/start: no surfaceOp
    cases = [
        (state_of([0]), not_on_surface, "checkpoint surface node 0 is damaged: event "),
        (state_of(order[::-1]), folded(b).export_nodes(), "stands where the order has"),
        (state_of(order), "[" + "{}," * (len(order) - 1) + "{}]", "surface node"),
        (state_of(order), "[1,]", "checkpoint surface nodes are not JSON"),
    ]
    for state, text, message in cases:
        restored = SurfaceState.restore(state, text)
        with pytest.raises(CheckpointError, match=message):
            restored.messages()
        with pytest.raises(CheckpointError, match=message):  # and again: nothing half-decoded
            restored.snapshot()


def test_a_tool_result_rewrite_after_a_restore_folds_like_the_original() -> None:
    """A restored surface knows its nodes from their checkpoint text: a rewrite of a tool
    result is checked against that text's type, as against the event itself."""
    b = LogBuilder()
    b.exchange("first", "c1")
    state = folded(b)
    restored = restored_from(state)
    (seq,) = [e.seq for e in b.events if e.type == "tool/result"]
    b.turn_start()
    rewrite = b.tool_result(
        "c1", "shorter", surface_op={"op": "replace", "start": seq, "end": seq}, cites=[seq]
    )
    for surface in (state, restored):
        surface.apply(rewrite)
    assert restored.messages() == state.messages()
    assert restored.export_nodes() == state.export_nodes()
    user = next(e.seq for e in b.events if e.type == "user/message")
    wrong = SessionEvent(
        "tool/result",
        rewrite.seq + 1,
        rewrite.time,
        dict(rewrite.payload),
        surface_op={"op": "replace", "start": user, "end": user},
        source_event_seqs=[user],
    )
    for surface in (state, restored):
        with pytest.raises(InvalidEventError, match="must target a current tool/result"):
            surface.apply(wrong)
