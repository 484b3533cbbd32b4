"""The lenient `StructureChecker.advance` that crash repair reads non-strict logs with (#17).

Logs here are written without strict mode: turns and steps without numbers, payloads of the
wrong shape, tool-call ids repeated while the first call is still unanswered. ``advance`` must
never raise on them, and the state it reads (and so the closers repair appends) must be exactly
the hand-written expectation.
"""

from __future__ import annotations

from typing import Any

import pytest

from todo_sessions.core.envelope import SessionEvent
from todo_sessions.core.repair import interrupted_turn_closers
from todo_sessions.core.structure import OpenCall, StructureChecker
from todo_sessions.errors import StructureError

T = 1_700_000_000_000
SID = "s"


def log(*items: tuple[str, Any]) -> list[SessionEvent]:
    """Events with seqs 0, 1, 2, … (payloads unchecked, as a non-strict log may hold)."""
    return [SessionEvent(kind, seq, T + seq, data) for seq, (kind, data) in enumerate(items)]


def advanced(events: list[SessionEvent]) -> StructureChecker:
    checker = StructureChecker()
    for event in events:
        checker.advance(event)  # never raises
    return checker


def state(events: list[SessionEvent]) -> tuple[Any, ...]:
    c = advanced(events)
    return c.next_seq, c.open_turn, c.open_step, c.unanswered_calls()


def closers(events: list[SessionEvent]) -> list[tuple[str, Any]]:
    """(type, data) of the closers; tool results as (type, (callId, turn, step, code))."""
    out: list[tuple[str, Any]] = []
    for c in interrupted_turn_closers(events, session_id=SID):
        assert c.seq == events[-1].seq + 1 + len(out)
        if c.type == "tool/result":
            d = c.data
            call = (d["message"]["source"]["callId"], d["turn"], d["step"], d["error"]["code"])
            out.append((c.type, call))
        else:
            out.append((c.type, c.data))
    return out


def block(call_id: Any, name: Any = "read") -> dict[str, Any]:
    return {"type": "tool-call", "id": call_id, "name": name, "arguments": "{}"}


def assistant(*blocks: Any, **where: int) -> tuple[str, Any]:
    return ("assistant/message", {**where, "message": {"id": "a", "content": list(blocks)}})


def call(call_id: Any, name: Any = "read", **where: int) -> tuple[str, Any]:
    return ("tool/call", {**where, "callId": call_id, "name": name, "arguments": "{}"})


def result(call_id: str, **where: int) -> tuple[str, Any]:
    message = {"id": "r", "role": "user", "source": {"kind": "tool", "callId": call_id}}
    return ("tool/result", {**where, "message": {**message, "content": []}})


def end_step(turn: int, step: int) -> tuple[str, Any]:
    return ("step/end", {"turn": turn, "step": step})


def end_turn(turn: int) -> tuple[str, Any]:
    return ("turn/end", {"turn": turn, "reason": {"kind": "interrupted"}})


UNKNOWN, NOT_STARTED = "TOOL_OUTCOME_UNKNOWN", "TOOL_NOT_STARTED"
MOVED = NOT_STARTED
"""The code of a started call's result in a step of its own: the one the reference's rules
take outside the call's step (its name and citation say "started": tests/core/test_repair.py)."""


# -- unnumbered turns and steps ---------------------------------------------------------------


def test_unnumbered_first_turn_and_step_are_one() -> None:
    events = log(("turn/start", {}), ("step/start", {}))
    assert state(events) == (2, 1, 1, ())
    assert closers(events) == [("step/end", {"turn": 1, "step": 1}), ("turn/end", _int(1))]


def test_unnumbered_turn_and_step_continue_from_the_last_ones() -> None:
    events = log(
        ("turn/start", {"turn": 1}),
        end_turn(1),
        ("turn/start", {}),  # turn 2
        ("step/start", {"turn": 2}),  # step 1
        end_step(2, 1),
        ("step/start", {}),  # step 2
    )
    assert state(events) == (6, 2, 2, ())
    assert closers(events) == [("step/end", {"turn": 2, "step": 2}), ("turn/end", _int(2))]


def test_unnumbered_turn_after_a_numbered_one_skips_ahead_from_it() -> None:
    events = log(
        ("turn/start", {"turn": 5}),
        end_turn(5),
        ("turn/start", {"turn": "six"}),  # not a number: 6
        ("step/start", {"step": 4}),
        end_step(6, 4),
        ("step/start", {"step": True}),  # a bool is no step number: 5
    )
    assert state(events) == (6, 6, 5, ())


def test_unnumbered_steps_restart_in_each_turn() -> None:
    events = log(
        ("turn/start", {}),
        ("step/start", {}),
        end_step(1, 1),
        ("step/start", {}),
        end_step(1, 2),
        end_turn(1),
        ("turn/start", {}),
        ("step/start", {}),
    )
    assert state(events) == (8, 2, 1, ())


def test_events_outside_any_turn_change_nothing_but_the_next_seq() -> None:
    events = log(
        ("step/start", {"turn": 1, "step": 1}),
        assistant(block("c1"), turn=1, step=1),
        call("c1", turn=1, step=1),
        ("step/end", {"turn": 1, "step": 1}),
    )
    assert state(events) == (4, None, None, ())
    assert closers(events) == []
    # and the first turn after them still starts at 1 with step 1
    more = log(*[(e.type, e.data_copy()) for e in events], ("turn/start", {}), ("step/start", {}))
    assert state(more) == (6, 1, 1, ())


def test_a_nested_turn_start_closes_the_open_step_and_forgets_its_calls() -> None:
    events = log(
        ("turn/start", {"turn": 1}),
        ("step/start", {"turn": 1, "step": 1}),
        call("c1", turn=1, step=1),
        ("turn/start", {}),  # nested: turn 2, no step, no calls
    )
    assert state(events) == (4, 2, None, ())
    assert closers(events) == [("turn/end", _int(2))]


# -- payloads of the wrong shape --------------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    ["a text", None, 7, {"type": "tool-call", "id": "c9"}, True],
    ids=["str", "none", "int", "dict", "bool"],
)
def test_assistant_content_that_is_not_a_list_holds_no_calls(content: Any) -> None:
    events = log(
        ("turn/start", {"turn": 1}),
        ("step/start", {"turn": 1, "step": 1}),
        ("assistant/message", {"turn": 1, "step": 1, "message": {"id": "a", "content": content}}),
    )
    assert state(events) == (3, 1, 1, ())
    assert closers(events) == [("step/end", {"turn": 1, "step": 1}), ("turn/end", _int(1))]


WEIRD: list[tuple[str, Any]] = [
    ("turn/start", []),
    ("turn/start", "x"),
    ("turn/start", None),
    ("step/start", 3),
    ("assistant/message", {"message": "not an object"}),
    ("assistant/message", {"message": {"content": ["x", 1, None, {"type": "tool-call"}]}}),
    ("assistant/message", {"message": {"content": [{"type": "tool-call", "id": 5}]}}),
    ("assistant/message", {"message": {"content": [{"type": "text", "id": "t"}]}}),
    ("assistant/message", {"message": None}),
    ("assistant/message", []),
    ("tool/call", {"callId": 5}),
    ("tool/call", {"callId": None, "name": "x"}),
    ("tool/call", []),
    ("tool/result", {"message": "x"}),
    ("tool/result", {"message": {"source": "x"}}),
    ("tool/result", {"message": {"source": {"callId": 3}}}),
    ("tool/result", {"message": {"source": {"callId": "never-called"}}}),
    ("tool/result", None),
    ("step/end", "x"),
    ("turn/end", 1),
    ("embedder/whatever", {"x": 1}),
]


@pytest.mark.parametrize("event", WEIRD, ids=[f"{t}:{d!r}"[:40] for t, d in WEIRD])
def test_advance_never_raises_inside_or_outside_a_step(event: tuple[str, Any]) -> None:
    for prefix in ([], [("turn/start", {"turn": 1})], [("turn/start", {}), ("step/start", {})]):
        events = log(*prefix, event)
        checker = advanced(events)
        assert checker.next_seq == len(events)
        assert checker.unanswered_calls() == ()
        interrupted_turn_closers(events, session_id=SID)


def test_check_reports_wrong_shapes_as_structure_errors() -> None:
    checker = StructureChecker()
    checker.apply(log(("turn/start", {"turn": 1}))[0])
    weird = SessionEvent("step/start", 1, T, "x")
    with pytest.raises(StructureError) as info:
        checker.check(weird)
    assert (info.value.rule, info.value.seq) == ("turn-mismatch", 1)
    assert str(info.value) == "step/start names turn None, but the open turn is 1 (seq 1)"


def test_ids_and_names_of_the_wrong_type_are_skipped_or_blanked() -> None:
    events = log(
        ("turn/start", {"turn": 1}),
        ("step/start", {"turn": 1, "step": 1}),
        assistant(block(5), block("b1", name=None), {"type": "tool-call", "id": "b2"}, turn=1),
        call(7, turn=1, step=1),
        call("c1", name=["x"], turn=1, step=1),
    )
    assert advanced(events).unanswered_calls() == (
        OpenCall("b1", "None", 1, 1, call_seq=None, block_seq=2),
        OpenCall("b2", "", 1, 1, call_seq=None, block_seq=2),
        OpenCall("c1", "", 1, 1, call_seq=4, block_seq=None),
    )


# -- where a call is when its event does not say ----------------------------------------------


def test_a_call_without_turn_or_step_takes_the_open_ones() -> None:
    events = log(
        ("turn/start", {"turn": 3}),
        ("step/start", {"turn": 3, "step": 2}),
        assistant(block("c1")),
        call("c2"),
    )
    assert advanced(events).unanswered_calls() == (
        OpenCall("c1", "read", 3, 2, call_seq=None, block_seq=2),
        OpenCall("c2", "read", 3, 2, call_seq=3, block_seq=None),
    )


def test_a_call_between_steps_takes_the_last_step() -> None:
    events = log(
        ("turn/start", {"turn": 1}),
        ("step/start", {"turn": 1, "step": 1}),
        end_step(1, 1),
        ("step/start", {"turn": 1, "step": 2}),
        end_step(1, 2),
        call("c1"),
    )
    assert advanced(events).unanswered_calls() == (
        OpenCall("c1", "read", 1, 2, call_seq=5, block_seq=None),
    )
    assert closers(events) == [  # answered inside a step of its own (issue 25, item 9)
        ("step/start", {"turn": 1, "step": 3}),
        ("tool/result", ("c1", 1, 3, MOVED)),
        ("step/end", {"turn": 1, "step": 3}),
        ("turn/end", _int(1)),
    ]


def test_a_call_before_any_step_is_in_step_one() -> None:
    events = log(("turn/start", {"turn": 2}), call("c1"), assistant(block("c2")))
    assert advanced(events).unanswered_calls() == (
        OpenCall("c1", "read", 2, 1, call_seq=1, block_seq=None),
        OpenCall("c2", "read", 2, 1, call_seq=None, block_seq=2),
    )


def test_numbers_the_event_gives_win_over_the_open_ones() -> None:
    events = log(
        ("turn/start", {"turn": 1}),
        ("step/start", {"turn": 1, "step": 1}),
        call("c1", turn=4, step=3),
    )
    assert advanced(events).unanswered_calls() == (
        OpenCall("c1", "read", 4, 3, call_seq=2, block_seq=None),
    )


def test_turn_and_step_numbered_zero_are_kept() -> None:
    events = log(("turn/start", {"turn": 0}), ("step/start", {"step": 0}), call("c1"))
    assert advanced(events).unanswered_calls() == (
        OpenCall("c1", "read", 0, 0, call_seq=2, block_seq=None),
    )
    assert closers(events) == [
        ("tool/result", ("c1", 0, 0, UNKNOWN)),
        ("step/end", {"turn": 0, "step": 0}),
        ("turn/end", _int(0)),
    ]


# -- repeated call ids ------------------------------------------------------------------------


def test_a_call_id_repeated_while_unanswered_is_a_second_call() -> None:
    events = log(
        ("turn/start", {"turn": 1}),
        ("step/start", {"turn": 1, "step": 1}),
        assistant(block("c1", "read"), turn=1, step=1),  # 2
        call("c1", "read", turn=1, step=1),  # 3: the call of block 2
        end_step(1, 1),
        ("step/start", {"turn": 1, "step": 2}),
        assistant(block("c1", "write"), turn=1, step=2),  # 6: c1 again, still unanswered
        call("c1", "write", turn=1, step=2),  # 7: the call of block 6
        call("c1", "again", turn=1, step=2),  # 8: a third call c1, without a block
    )
    assert advanced(events).unanswered_calls() == (
        OpenCall("c1", "read", 1, 1, call_seq=3, block_seq=2),
        OpenCall("c1", "write", 1, 2, call_seq=7, block_seq=6),
        OpenCall("c1", "again", 1, 2, call_seq=8, block_seq=None),
    )
    assert closers(events) == [  # step 1's call is answered in a step of its own (item 9)
        ("tool/result", ("c1", 1, 2, UNKNOWN)),
        ("tool/result", ("c1", 1, 2, UNKNOWN)),
        ("step/end", {"turn": 1, "step": 2}),
        ("step/start", {"turn": 1, "step": 3}),
        ("tool/result", ("c1", 1, 3, MOVED)),
        ("step/end", {"turn": 1, "step": 3}),
        ("turn/end", _int(1)),
    ]
    results = [c for c in interrupted_turn_closers(events, session_id=SID) if c.seq != 0]
    cited = [c.source_event_seqs for c in results if c.type == "tool/result"]
    assert cited == [(7,), (8,), (3,)]


def test_a_repeated_block_id_in_one_message_is_a_second_call() -> None:
    events = log(
        ("turn/start", {"turn": 1}),
        ("step/start", {"turn": 1, "step": 1}),
        assistant(block("c1", "a"), block("c1", "b"), turn=1, step=1),
        call("c1", "a", turn=1, step=1),
    )
    # the tool/call attaches to the latest call with that id that has no tool/call yet
    assert advanced(events).unanswered_calls() == (
        OpenCall("c1", "a", 1, 1, call_seq=None, block_seq=2),
        OpenCall("c1", "b", 1, 1, call_seq=3, block_seq=2),
    )


def test_a_block_after_its_tool_call_joins_that_call() -> None:
    events = log(
        ("turn/start", {"turn": 1}),
        ("step/start", {"turn": 1, "step": 1}),
        call("c1", "read", turn=1, step=1),
        assistant(block("c1", "read"), turn=1, step=1),
    )
    assert advanced(events).unanswered_calls() == (
        OpenCall("c1", "read", 1, 1, call_seq=2, block_seq=3),
    )


def test_a_result_answers_the_latest_call_with_its_id() -> None:
    events = log(
        ("turn/start", {"turn": 1}),
        ("step/start", {"turn": 1, "step": 1}),
        call("c1", "first", turn=1, step=1),
        call("c1", "second", turn=1, step=1),
        result("c1", turn=1, step=1),
    )
    assert advanced(events).unanswered_calls() == (
        OpenCall("c1", "first", 1, 1, call_seq=2, block_seq=None),
    )


def test_an_id_reused_after_its_answer_is_a_new_call() -> None:
    events = log(
        ("turn/start", {"turn": 1}),
        ("step/start", {"turn": 1, "step": 1}),
        assistant(block("c1", "a"), turn=1, step=1),
        call("c1", "a", turn=1, step=1),
        result("c1", turn=1, step=1),
        assistant(block("c1", "b"), turn=1, step=1),  # 5: reused: not started
        result("c2", turn=1, step=1),  # answers nothing
        call("c3", "c", turn=1, step=1),  # 7
        result("c3", turn=1, step=1),
        call("c3", "d", turn=1, step=1),  # 9: reused: started
    )
    assert advanced(events).unanswered_calls() == (
        OpenCall("c1", "b", 1, 1, call_seq=None, block_seq=5),
        OpenCall("c3", "d", 1, 1, call_seq=9, block_seq=None),
    )
    assert closers(events) == [
        ("tool/result", ("c1", 1, 1, NOT_STARTED)),
        ("tool/result", ("c3", 1, 1, UNKNOWN)),
        ("step/end", {"turn": 1, "step": 1}),
        ("turn/end", _int(1)),
    ]


def test_a_turn_end_forgets_the_calls_of_the_turn() -> None:
    events = log(
        ("turn/start", {"turn": 1}),
        ("step/start", {"turn": 1, "step": 1}),
        call("c1", turn=1, step=1),
        ("turn/end", {"turn": 1}),
        ("turn/start", {"turn": 2}),
    )
    assert state(events) == (5, 2, None, ())


def _int(turn: int) -> dict[str, Any]:
    return {"turn": turn, "reason": {"kind": "interrupted"}}


# -- a repaired result in the open step --------------------------------------------------------


@pytest.mark.parametrize(("code", "accepted"), [(UNKNOWN, True), ("SOMETHING_ELSE", False)])
def test_only_an_outcome_unknown_result_may_answer_an_earlier_step_s_call(
    code: str, accepted: bool
) -> None:
    """Crash repair answers a started call of a closed step in the open one with
    ``TOOL_OUTCOME_UNKNOWN``; any other result there names the wrong step."""
    events = log(
        ("turn/start", {"turn": 1}),
        ("step/start", {"turn": 1, "step": 1}),
        call("c1", turn=1, step=1),
        end_step(1, 1),
        ("step/start", {"turn": 1, "step": 2}),
    )
    checker = advanced(events)
    kind, data = result("c1", turn=1, step=2)
    answer = SessionEvent(kind, 5, T + 5, {**data, "error": {"code": code}})
    if accepted:
        checker.check(answer)
    else:
        with pytest.raises(StructureError, match="names step 2"):
            checker.check(answer)
