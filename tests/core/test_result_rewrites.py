"""Replacing a ``tool/result`` (docs/format.md, "Surface rules"): a replacement rewrites exactly
one current ``tool/result`` and changes only its result block's content; a later turn may prune
an earlier turn's result, in strict mode too (issue 25, items 1 and 2)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.factories import header
from todo_sessions import InvalidEventError, Session, StructureError
from todo_sessions.core.envelope import SessionEvent
from todo_sessions.core.structure import check_structure
from todo_sessions.core.surface import SurfaceState, derive_messages, fold_surface

T = 1_700_000_000_000


def _wire(kind: str, seq: int, data: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": kind, "seq": seq, "time": T + seq, "data": data, **extra}


def _result(seq: int, turn: int, call: str, text: str, **extra: Any) -> dict[str, Any]:
    data = {
        "turn": turn,
        "step": 1,
        "message": {
            "id": f"r{call}",
            "role": "user",
            "source": {"kind": "tool", "callId": call},
            "content": [
                {
                    "type": "tool-result",
                    "toolCallId": call,
                    "content": [{"type": "text", "text": text}],
                }
            ],
        },
        "meta": {"durationMs": 3},
    }
    return _wire("tool/result", seq, data, **extra)


def _turn_with_call(start: int, turn: int, call: str) -> list[dict[str, Any]]:
    """turn/start, user message, step/start, assistant call, tool/call, result, step/end, end."""
    step = {"turn": turn, "step": 1}
    return [
        _wire("turn/start", start, {"turn": turn}),
        _wire(
            "user/message",
            start + 1,
            {
                "id": f"u{turn}",
                "role": "user",
                "source": {"kind": "user"},
                "content": [{"type": "text", "text": "go"}],
            },
            surfaceOp="append",
        ),
        _wire("step/start", start + 2, step),
        _wire(
            "assistant/message",
            start + 3,
            {
                **step,
                "message": {
                    "id": f"a{turn}",
                    "role": "assistant",
                    "source": {"kind": "model", "provider": "p", "model": "m"},
                    "content": [
                        {"type": "tool-call", "id": call, "name": "read", "arguments": "{}"}
                    ],
                },
            },
            surfaceOp="append",
            sourceEventSeqs=[],
        ),
        _wire("tool/call", start + 4, {**step, "callId": call, "name": "read", "arguments": "{}"}),
        _result(
            start + 5, turn, call, "long output", surfaceOp="append", sourceEventSeqs=[start + 4]
        ),
        _wire("step/end", start + 6, step),
        _wire("turn/end", start + 7, {"turn": turn, "reason": {"kind": "done"}}),
    ]


def _events(wires: list[dict[str, Any]]) -> list[SessionEvent]:
    return [SessionEvent.from_dict(w) for w in wires]


def _two_turns() -> list[dict[str, Any]]:
    return _turn_with_call(0, 1, "c1") + _turn_with_call(8, 2, "c2")


def _prune(seq: int, target: int, turn: int, call: str, **change: Any) -> dict[str, Any]:
    wire = _result(seq, turn, call, "[pruned]")
    wire["surfaceOp"] = {"op": "replace", "start": target, "end": target}
    wire["sourceEventSeqs"] = [target]
    for path, value in change.items():
        node: Any = wire
        *parents, last = path.split(".")
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        node[last] = value
    return wire


def _fold_error(wires: list[dict[str, Any]]) -> str:
    with pytest.raises(InvalidEventError) as caught:
        fold_surface(_events(wires))
    return str(caught.value)


def test_content_only_rewrite_of_an_earlier_turn_is_accepted_in_strict_mode() -> None:
    # Item 2: seq 5 (turn 1) pruned inside turn 2, after turn 2's own result.
    wires = _two_turns()
    wires.insert(14, _prune(14, 5, 1, "c1"))
    for later in wires[15:]:
        later["seq"] += 1
    events = _events(wires)
    check_structure(events)  # strict structure accepts it
    session = Session(header(), events, strict=True)
    texts = [m.to_wire()["content"] for m in session.derive_messages()]
    assert texts[2][0]["content"] == [{"type": "text", "text": "[pruned]"}]
    assert [r.seq for r in fold_surface(events).replacements] == [14]
    # Appended live too, in strict mode, and the pruned call is not counted as answered twice.
    live = Session(header("s2"), _events(_two_turns()[:14]), strict=True)
    prune = _prune(14, 5, 1, "c1")
    live.append(
        "tool/result",
        prune["data"],
        surface_op=prune["surfaceOp"],
        source_event_seqs=prune["sourceEventSeqs"],
    )
    assert live.next_seq == 15


def test_content_only_rewrite_in_the_same_turn_is_not_a_second_answer() -> None:
    # Item 2, the other half: strict mode said "already has a result" to a rewrite of a result
    # of the open turn. The rewrite is no answer: the call stays answered once, and a real
    # second answer is still refused.
    wires = _turn_with_call(0, 1, "c1")
    wires.insert(6, _prune(6, 5, 1, "c1"))
    for later in wires[7:]:
        later["seq"] += 1
    events = _events(wires)
    check_structure(events)
    session = Session(header(), events[:7], strict=True)
    assert session.unanswered_calls() == ()
    again = _result(7, 1, "c1", "again", surfaceOp="append", sourceEventSeqs=[4])
    with pytest.raises(StructureError, match="already has a result"):
        session.append(
            "tool/result",
            again["data"],
            surface_op="append",
            source_event_seqs=again["sourceEventSeqs"],
        )
    assert [m.to_wire()["content"][0].get("content") for m in session.derive_messages()][2] == [
        {"type": "text", "text": "[pruned]"}
    ]


def test_rewrite_outside_any_turn_is_refused_in_strict_mode() -> None:
    wires = [*_turn_with_call(0, 1, "c1"), _prune(8, 5, 1, "c1")]
    fold_surface(_events(wires))  # the surface accepts it
    with pytest.raises(Exception, match="outside any open turn"):
        check_structure(_events(wires))


@pytest.mark.parametrize(
    "change",
    [
        {"data.message.id": "other"},
        {"data.message.content.0.isError": True},
        {"data.meta": {"durationMs": 4}},
        {"data.error": {"name": "E", "code": "X"}},
        {"data.step": 2},
    ],
)
def test_rewrite_changing_more_than_content_is_refused(change: dict[str, Any]) -> None:
    wires = _turn_with_call(0, 1, "c1")[:7]
    wires.append(_prune(7, 5, 1, "c1", **change))
    assert "may change only content" in _fold_error(wires)


def test_rewrite_spanning_two_nodes_is_refused() -> None:
    wires = _turn_with_call(0, 1, "c1")[:7]
    prune = _prune(7, 5, 1, "c1")
    prune["surfaceOp"] = {"op": "replace", "start": 3, "end": 5}
    prune["sourceEventSeqs"] = [3, 5]
    assert "must rewrite exactly one current node" in _fold_error([*wires, prune])


def test_rewrite_of_a_node_that_is_not_a_result_is_refused() -> None:
    wires = _turn_with_call(0, 1, "c1")[:7]
    prune = _prune(7, 3, 1, "c1")
    assert "must target a current tool/result" in _fold_error([*wires, prune])


def test_a_refused_rewrite_changes_nothing() -> None:
    state = SurfaceState()
    for event in _events(_turn_with_call(0, 1, "c1")[:7]):
        state.apply(event)
    before = (state.seqs, state.messages())
    with pytest.raises(InvalidEventError):
        state.apply(SessionEvent.from_dict(_prune(7, 5, 1, "c1", **{"data.meta": None})))
    assert (state.seqs, state.messages()) == before


def test_rewrite_checks_against_a_restored_checkpoint_node() -> None:
    state = SurfaceState()
    for event in _events(_turn_with_call(0, 1, "c1")[:7]):
        state.apply(event)
    restored = SurfaceState.restore(copy.deepcopy(state.export()), state.export_nodes())
    with pytest.raises(InvalidEventError, match="may change only content"):
        restored.apply(SessionEvent.from_dict(_prune(7, 5, 1, "c1", **{"data.meta": 1})))
    restored.apply(SessionEvent.from_dict(_prune(7, 5, 1, "c1")))
    assert len(derive_messages(_events(_turn_with_call(0, 1, "c1")[:7]))) == len(
        restored.messages()
    )
