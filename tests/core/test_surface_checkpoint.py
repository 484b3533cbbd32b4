"""A surface exported for a checkpoint and restored from it folds on exactly like the original,
and a state that is not one is refused (issue #17; SurfaceState.export/restore)."""

from __future__ import annotations

from typing import Any

import pytest
from logs import LogBuilder

from todo_sessions.core.surface import Replacement, SurfaceState
from todo_sessions.errors import InvalidEventError


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


def test_export_holds_the_nodes_events_without_citations_and_the_replacements() -> None:
    b = surface_log()
    state = folded(b)
    exported = state.export()
    assert [node["seq"] for node in exported["nodes"]] == list(state.seqs)
    for node in exported["nodes"]:
        event = b.events[node["seq"]].to_dict()
        event.pop("sourceEventSeqs", None)
        assert node == event
    assert all("sourceEventSeqs" not in node for node in exported["nodes"])
    (replacement,) = state.replacements
    assert exported["replacements"] == [
        [replacement.seq, replacement.start, replacement.end, list(replacement.removed)]
    ]
    assert SurfaceState().export() == {"nodes": [], "replacements": []}


def test_a_restored_surface_is_the_same_and_folds_on_the_same() -> None:
    b = surface_log()
    state = folded(b)
    restored = SurfaceState.restore(state.export())
    assert restored.export() == state.export()
    assert restored.seqs == state.seqs
    assert restored.replacements == state.replacements
    assert restored.messages() == state.messages()
    assert restored.snapshot() == state.snapshot()
    assert all(seq in restored for seq in state.seqs)
    b.step_start()
    b.assistant("more", cites=[])
    for surface in (state, restored):
        surface.apply(b.events[-2])
        surface.apply(b.events[-1])
    assert restored.export() == state.export()
    assert restored.messages() == state.messages()


def test_a_restored_surface_keeps_its_rules() -> None:
    b = surface_log()
    restored = SurfaceState.restore(folded(b).export())
    first = restored.seqs[0]
    assert first != 0
    b.user("again", surface_op={"op": "replace", "start": first, "end": first}, cites=[0])
    with pytest.raises(InvalidEventError) as info:
        restored.apply(b.events[-1])
    assert info.value.field == "sourceEventSeqs"


def state_of(nodes: Any, replacements: Any = ()) -> dict[str, Any]:
    return {"nodes": nodes, "replacements": list(replacements)}


def test_states_that_are_not_a_surface_are_refused() -> None:
    b = surface_log()
    nodes = folded(b).export()["nodes"]
    not_on_surface = b.events[0].to_dict()  # turn/start: no surfaceOp
    cases: list[tuple[Any, str]] = [
        ({"replacements": []}, "not a surface state: KeyError('nodes')"),
        ({"nodes": []}, "not a surface state: KeyError('replacements')"),
        (state_of(5), "not a surface state: TypeError(\"'int' object is not iterable\")"),
        (state_of([not_on_surface]), "seq 0 cannot be a surface node here"),
        (state_of([nodes[0], nodes[0]]), f"seq {nodes[0]['seq']} cannot be a surface node here"),
        (state_of(nodes, [[1, 0, "2", []]]), "replacement [1, 0, '2'] is not made of seqs"),
        (state_of(nodes, [[1, 0, 2, [True]]]), "replacement [1, 0, 2, True] is not made of seqs"),
        (state_of(nodes, [[1, 0, 2]]), "not enough values to unpack (expected 4, got 3)"),
    ]
    for state, message in cases:
        with pytest.raises(ValueError) as info:
            SurfaceState.restore(state)
        assert str(info.value).startswith(message), (state, str(info.value))
    restored = SurfaceState.restore(state_of(nodes, [[9, 1, 2, [1, 2]]]))
    assert restored.replacements == (Replacement(9, 1, 2, (1, 2)),)
