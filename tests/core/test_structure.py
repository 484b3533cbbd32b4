"""Turn and step structure (docs/format.md, "Turns and steps")."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from logs import T0, LogBuilder, LogPlan, build_plan, log_plans

from todo_sessions.core.envelope import SessionEvent
from todo_sessions.core.structure import OpenCall, StructureChecker, check_structure
from todo_sessions.errors import StructureError

NOT_STARTED = {"name": "ToolNotStartedError", "code": "TOOL_NOT_STARTED"}


def _in_step(b: LogBuilder) -> None:
    b.turn_start()
    b.user("go")
    b.step_start()


def _in_turn(b: LogBuilder) -> None:
    b.turn_start()
    b.user("go")


# -- valid logs -------------------------------------------------------------------------------


def _full_session(b: LogBuilder) -> None:
    b.user("before any turn")
    b.exchange("one", "c1", "c2")
    b.end_seed()
    b.exchange("two")
    b.turn_start()
    b.request_header()
    b.request_context()
    b.user("three")
    b.todo(("a", "in_progress"))
    b.step_start()
    b.chunk("x")
    b.assistant("x", calls=["c3"], cites=[b.next_seq - 1])
    b.tool_call("c3")
    b.tool_result("c3")
    b.step_end()
    b.step_start()
    b.step_end()
    b.turn_end("interrupted")


def _unknown_types_anywhere(b: LogBuilder) -> None:
    b.add("embedder/note", {"x": 1}, ignorable=True)
    _in_step(b)
    b.add("embedder/note", {"x": 2}, ignorable=True)
    b.step_end()
    b.turn_end()


def _not_started_result_is_exempt(b: LogBuilder) -> None:
    _in_step(b)
    b.assistant(calls=["c1", "c2"])
    b.tool_call("c1")
    b.tool_result("c1")
    b.step_end()
    b.step_start()
    # c2 never started; its synthetic result names the step of its assistant message
    b.step -= 1
    b.tool_result("c2", "not started", is_error=True, error=NOT_STARTED)
    b.step += 1
    b.step_end()
    b.turn_end()


def _not_started_without_any_call(b: LogBuilder) -> None:
    _in_turn(b)
    b.step = 1
    b.tool_result("ghost", "not started", error=NOT_STARTED, cites=None)
    b.turn_end()


def _result_after_its_step_closed(b: LogBuilder) -> None:
    _in_step(b)
    b.assistant(calls=["c1"])
    b.tool_call("c1")
    b.step_end()
    b.tool_result("c1")  # names the call's step, which is closed
    b.turn_end()


def _steps_restart_each_turn(b: LogBuilder) -> None:
    for _ in range(3):
        b.turn_start()
        b.text_step()
        b.text_step()
        b.turn_end()


def _calls_answered_out_of_order(b: LogBuilder) -> None:
    _in_step(b)
    b.assistant(calls=["c1", "c2"])
    b.tool_call("c1")
    b.tool_call("c2")
    b.tool_result("c2")
    b.tool_result("c1")
    b.step_end()
    b.turn_end()


VALID: list[Callable[[LogBuilder], None]] = [
    _full_session,
    _unknown_types_anywhere,
    _not_started_result_is_exempt,
    _not_started_without_any_call,
    _result_after_its_step_closed,
    _steps_restart_each_turn,
    _calls_answered_out_of_order,
]


@pytest.mark.parametrize("script", VALID, ids=[f.__name__ for f in VALID])
def test_valid_logs_pass(script: Callable[[LogBuilder], None]) -> None:
    b = LogBuilder()
    script(b)
    check_structure(b.events)


@settings(max_examples=50, deadline=None)
@given(plan=log_plans())
def test_generated_logs_pass(plan: LogPlan) -> None:
    events, _ = build_plan(plan, range(1000))
    check_structure(events)


# -- violations -------------------------------------------------------------------------------


def _gap(b: LogBuilder) -> SessionEvent:
    b.user("x")
    return SessionEvent("turn/start", 2, T0, {"turn": 1})


def _not_from_zero(b: LogBuilder) -> SessionEvent:
    return SessionEvent("turn/start", 1, T0, {"turn": 1})


def _first_turn_is_two(b: LogBuilder) -> SessionEvent:
    b.turn = 1
    return b.turn_start()


def _turn_skips(b: LogBuilder) -> SessionEvent:
    b.exchange()
    b.turn += 1
    return b.turn_start()


def _turn_repeats(b: LogBuilder) -> SessionEvent:
    b.exchange()
    b.turn -= 1
    return b.turn_start()


def _turn_nested(b: LogBuilder) -> SessionEvent:
    _in_turn(b)
    return b.turn_start()


def _turn_end_outside(b: LogBuilder) -> SessionEvent:
    b.exchange()
    return b.turn_end()


def _turn_end_wrong_turn(b: LogBuilder) -> SessionEvent:
    _in_turn(b)
    b.turn = 5
    return b.turn_end()


def _turn_end_with_open_step(b: LogBuilder) -> SessionEvent:
    _in_step(b)
    return b.turn_end()


def _step_outside_turn(b: LogBuilder) -> SessionEvent:
    b.exchange()
    return b.step_start()


def _step_nested(b: LogBuilder) -> SessionEvent:
    _in_step(b)
    return b.step_start()


def _first_step_is_two(b: LogBuilder) -> SessionEvent:
    _in_turn(b)
    b.step = 1
    return b.step_start()


def _step_skips(b: LogBuilder) -> SessionEvent:
    _in_turn(b)
    b.text_step()
    b.step += 1
    return b.step_start()


def _step_names_wrong_turn(b: LogBuilder) -> SessionEvent:
    _in_turn(b)
    return b.add("step/start", {"turn": 2, "step": 1})


def _step_end_outside_step(b: LogBuilder) -> SessionEvent:
    _in_turn(b)
    b.text_step()
    return b.step_end()


def _step_end_wrong_step(b: LogBuilder) -> SessionEvent:
    _in_step(b)
    b.step = 2
    return b.step_end()


def _step_end_wrong_turn(b: LogBuilder) -> SessionEvent:
    _in_step(b)
    return b.add("step/end", {"turn": 3, "step": 1})


def _chunk_outside_step(b: LogBuilder) -> SessionEvent:
    _in_turn(b)
    b.step = 1
    return b.chunk()


def _chunk_wrong_step(b: LogBuilder) -> SessionEvent:
    _in_step(b)
    b.step = 4
    return b.chunk()


def _assistant_outside_turn(b: LogBuilder) -> SessionEvent:
    b.exchange()
    return b.assistant("late")


def _assistant_outside_step(b: LogBuilder) -> SessionEvent:
    _in_turn(b)
    b.text_step()
    return b.assistant("between steps")


def _assistant_wrong_turn(b: LogBuilder) -> SessionEvent:
    _in_step(b)
    b.turn = 2
    return b.assistant("x")


def _tool_call_outside_step(b: LogBuilder) -> SessionEvent:
    _in_turn(b)
    b.step = 1
    return b.tool_call("c1")


def _tool_call_wrong_step(b: LogBuilder) -> SessionEvent:
    _in_step(b)
    b.step = 2
    return b.tool_call("c1")


def _result_unknown_call(b: LogBuilder) -> SessionEvent:
    _in_step(b)
    b.assistant(calls=["c1"])
    b.tool_call("c1")
    return b.tool_result("c9", cites=[b.next_seq - 1])


def _result_for_block_only(b: LogBuilder) -> SessionEvent:
    _in_step(b)
    b.assistant(calls=["c1"])
    return b.tool_result("c1", cites=[b.next_seq - 1])


def _result_other_step(b: LogBuilder) -> SessionEvent:
    _in_step(b)
    b.assistant(calls=["c1"])
    b.tool_call("c1")
    b.step_end()
    b.step_start()
    return b.tool_result("c1")


def _result_call_of_previous_turn(b: LogBuilder) -> SessionEvent:
    _in_step(b)
    b.assistant(calls=["c1"])
    b.tool_call("c1")
    b.step_end()
    b.turn_end()
    b.turn_start()
    b.step_start()
    b.step = 1
    return b.tool_result("c1")


def _result_outside_turn(b: LogBuilder) -> SessionEvent:
    _in_step(b)
    b.assistant(calls=["c1"])
    b.tool_call("c1")
    b.step_end()
    b.turn_end()
    return b.tool_result("c1")


def _not_started_outside_turn(b: LogBuilder) -> SessionEvent:
    b.turn, b.step = 1, 1
    return b.tool_result("c1", error=NOT_STARTED, cites=None)


def _todo_outside(b: LogBuilder) -> SessionEvent:
    return b.todo(("a", "pending"))


def _todo_after_turn(b: LogBuilder) -> SessionEvent:
    b.exchange()
    return b.todo()


def _header_outside(b: LogBuilder) -> SessionEvent:
    return b.request_header()


def _context_outside(b: LogBuilder) -> SessionEvent:
    b.exchange()
    return b.request_context()


def _seed_inside_turn(b: LogBuilder) -> SessionEvent:
    _in_turn(b)
    return b.end_seed()


VIOLATIONS: list[tuple[Callable[[LogBuilder], SessionEvent], str, str]] = [
    (_gap, "seq", "has seq 2, expected seq 1"),
    (_not_from_zero, "seq", "expected seq 0"),
    (_first_turn_is_two, "turn-number", "turn/start has turn 2, expected 1"),
    (_turn_skips, "turn-number", "turn/start has turn 3, expected 2"),
    (_turn_repeats, "turn-number", "turn/start has turn 1, expected 2"),
    (_turn_nested, "turn-nested", "while turn 1 is still open"),
    (_turn_end_outside, "outside-turn", "turn/end appended outside any open turn"),
    (_turn_end_wrong_turn, "turn-mismatch", "turn/end names turn 5, but the open turn is 1"),
    (_turn_end_with_open_step, "step-open", "turn/end while step 1 is open"),
    (_step_outside_turn, "outside-turn", "step/start appended outside any open turn"),
    (_step_nested, "step-nested", "while step 1 is still open"),
    (_first_step_is_two, "step-number", "step/start has step 2, expected 1"),
    (_step_skips, "step-number", "step/start has step 3, expected 2"),
    (_step_names_wrong_turn, "turn-mismatch", "step/start names turn 2"),
    (_step_end_outside_step, "outside-step", "step/end appended outside any open step"),
    (_step_end_wrong_step, "step-mismatch", "step/end names step 2, but the open step is 1"),
    (_step_end_wrong_turn, "turn-mismatch", "step/end names turn 3"),
    (_chunk_outside_step, "outside-step", "assistant/chunk appended outside any open step"),
    (_chunk_wrong_step, "step-mismatch", "assistant/chunk names step 4"),
    (_assistant_outside_turn, "outside-turn", "assistant/message appended outside any open turn"),
    (_assistant_outside_step, "outside-step", "assistant/message appended outside any open step"),
    (_assistant_wrong_turn, "turn-mismatch", "assistant/message names turn 2"),
    (_tool_call_outside_step, "outside-step", "tool/call appended outside any open step"),
    (_tool_call_wrong_step, "step-mismatch", "tool/call names step 2"),
    (_result_unknown_call, "unknown-call", "answers call 'c9', which has no tool/call"),
    (_result_for_block_only, "unknown-call", "answers call 'c1', which has no tool/call"),
    (_result_other_step, "step-mismatch", "names step 2, but the tool/call (seq 4) is in step 1"),
    (_result_call_of_previous_turn, "unknown-call", "has no tool/call in turn 2"),
    (_result_outside_turn, "outside-turn", "tool/result appended outside any open turn"),
    (_not_started_outside_turn, "outside-turn", "tool/result appended outside any open turn"),
    (_todo_outside, "outside-turn", "todo/write appended outside any open turn"),
    (_todo_after_turn, "outside-turn", "todo/write appended outside any open turn"),
    (_header_outside, "outside-turn", "request/header appended outside any open turn"),
    (_context_outside, "outside-turn", "request/context appended outside any open turn"),
    (_seed_inside_turn, "seed-inside-turn", "session/end-seed appended inside open turn 1"),
]


@pytest.mark.parametrize(
    ("script", "rule", "text"), VIOLATIONS, ids=[case[0].__name__ for case in VIOLATIONS]
)
def test_violations(script: Callable[[LogBuilder], SessionEvent], rule: str, text: str) -> None:
    b = LogBuilder()
    bad = script(b)
    prefix = [e for e in b.events if e is not bad]
    check_structure(prefix)

    checker = StructureChecker()
    for event in prefix:
        checker.apply(event)
    state = (checker.next_seq, checker.open_turn, checker.open_step, checker.unanswered_calls())
    with pytest.raises(StructureError) as info:
        checker.check(bad)
    assert info.value.rule == rule
    assert info.value.seq == bad.seq
    assert text in str(info.value)
    assert f"(seq {bad.seq})" in str(info.value)
    with pytest.raises(StructureError):
        checker.apply(bad)
    after = (checker.next_seq, checker.open_turn, checker.open_step, checker.unanswered_calls())
    assert after == state

    with pytest.raises(StructureError) as whole:
        check_structure([*prefix, bad])
    assert whole.value.rule == rule


def test_check_structure_stops_at_the_first_violation() -> None:
    b = LogBuilder()
    b.todo()  # seq 0: outside a turn
    b.turn_start()
    b.turn_start()  # seq 2: nested
    with pytest.raises(StructureError) as info:
        check_structure(b.events)
    assert (info.value.seq, info.value.rule) == (0, "outside-turn")


# -- exposed state ----------------------------------------------------------------------------


def test_state_tracks_open_turn_step_and_unanswered_calls() -> None:
    b = LogBuilder()
    checker = StructureChecker()

    def feed() -> None:
        for event in b.events[checker.next_seq :]:
            checker.apply(event)

    assert (checker.open_turn, checker.open_step, checker.next_seq) == (None, None, 0)
    _in_step(b)
    feed()
    assert (checker.open_turn, checker.open_step) == (1, 1)
    b.assistant(calls=[("c1", "read"), ("c2", "write")])  # seq 3
    b.tool_call("c1", "read")  # seq 4
    b.tool_call("c3", "grep")  # seq 5: a call without a block
    feed()
    assert checker.unanswered_calls() == (
        OpenCall("c1", "read", 1, 1, call_seq=4, block_seq=3),
        OpenCall("c2", "write", 1, 1, call_seq=None, block_seq=3),
        OpenCall("c3", "grep", 1, 1, call_seq=5, block_seq=None),
    )
    b.tool_result("c1")
    b.step_end()
    feed()
    assert checker.open_step is None
    assert [c.call_id for c in checker.unanswered_calls()] == ["c2", "c3"]
    b.turn_end()
    feed()
    assert (checker.open_turn, checker.open_step, checker.unanswered_calls()) == (None, None, ())


def test_advance_is_lenient() -> None:
    b = LogBuilder()
    b.todo()  # outside any turn
    b.add("step/start", {"turn": 1, "step": 1})  # no turn
    b.turn_start()
    b.turn_start()  # nested
    checker = StructureChecker()
    for event in b.events:
        checker.advance(event)
    assert (checker.open_turn, checker.next_seq) == (2, 4)
