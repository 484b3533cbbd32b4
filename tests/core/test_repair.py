"""Closers of an interrupted turn (docs/design.md, "Crash repair")."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from logs import T0, LogBuilder, LogPlan, build_plan, log_plans, text_of

from tests.conformance import reference_invariants_problem
from todo_sessions.core.catalog import validate_event
from todo_sessions.core.envelope import SessionEvent
from todo_sessions.core.messages import (
    AssistantMessage,
    Message,
    ToolCallBlock,
    ToolResultBlock,
    UserMessage,
)
from todo_sessions.core.repair import interrupted_turn_closers
from todo_sessions.core.structure import check_structure
from todo_sessions.core.surface import derive_messages

SID = "session-1"
RETRY = (
    "retry only if the operation is read-only or idempotent; if it may have side effects, "
    "first verify external state or ask the user"
)
UNKNOWN = {"name": "ToolOutcomeUnknownError", "code": "TOOL_OUTCOME_UNKNOWN"}
NOT_STARTED = {"name": "ToolNotStartedError", "code": "TOOL_NOT_STARTED"}
CLOSED_STEP = {"name": "ToolOutcomeUnknownError", "code": "TOOL_NOT_STARTED"}


def unpaired_calls(messages: Sequence[Message]) -> list[str]:
    """Ids of tool-call blocks in the history that no tool-result block answers."""
    calls = [
        block.id
        for m in messages
        if isinstance(m, AssistantMessage)
        for block in m.content
        if isinstance(block, ToolCallBlock)
    ]
    answered = {
        block.tool_call_id
        for m in messages
        if isinstance(m, UserMessage)
        for block in m.content
        if isinstance(block, ToolResultBlock)
    }
    return [c for c in calls if c not in answered]


def assert_closes(events: list[SessionEvent], closers: list[SessionEvent]) -> None:
    """The closers continue the log validly and leave a complete history."""
    for closer in closers:
        validate_event(closer)
    repaired = [*events, *closers]
    check_structure(repaired)
    assert [c.seq for c in closers] == list(range(len(events), len(repaired)))
    assert all(c.time == events[-1].time for c in closers)
    assert unpaired_calls(derive_messages(repaired)) == []
    assert interrupted_turn_closers(repaired, session_id=SID) == []
    if reference_invariants_problem(events) is None:  # issue 25, item 9
        assert reference_invariants_problem(repaired) is None


def _kinds(closers: list[SessionEvent]) -> list[str]:
    labels = []
    for c in closers:
        error = c.data.get("error") if c.type == "tool/result" else None
        labels.append(f"{c.type}:{error['name']}" if error else c.type)
    return labels


# -- which closers ----------------------------------------------------------------------------


def _closed(b: LogBuilder) -> None:
    b.exchange("one", "c1")
    b.user("outside")


def _only_outside(b: LogBuilder) -> None:
    b.user("hello")
    b.add("embedder/note", {}, ignorable=True)


def _open_turn_no_step(b: LogBuilder) -> None:
    b.exchange()
    b.turn_start()
    b.user("two")
    b.todo(("a", "pending"))


def _open_step(b: LogBuilder) -> None:
    b.turn_start()
    b.user("go")
    b.step_start()
    b.chunk("thi")


def _between_steps(b: LogBuilder) -> None:
    b.turn_start()
    b.user("go")
    b.tool_step("c1")


def _not_started(b: LogBuilder) -> None:
    _open_step(b)
    b.assistant("reading", calls=["c1"])


def _started(b: LogBuilder) -> None:
    _not_started(b)
    b.tool_call("c1")


def _mixed(b: LogBuilder) -> None:
    _open_step(b)
    b.assistant(calls=["c1", "c2", "c3"])
    b.tool_call("c1")
    b.tool_result("c1")
    b.tool_call("c2")
    b.tool_call("c4")  # a call without an assistant block


def _not_started_in_closed_step(b: LogBuilder) -> None:
    _open_step(b)
    b.assistant(calls=["c1"])
    b.step_end()
    b.step_start()


def _started_in_closed_step(b: LogBuilder) -> None:
    _started(b)
    b.step_end()


CASES: list[tuple[Callable[[LogBuilder], None], list[str]]] = [
    (_closed, []),
    (_only_outside, []),
    (_open_turn_no_step, ["turn/end"]),
    (_open_step, ["step/end", "turn/end"]),
    (_between_steps, ["turn/end"]),
    (_not_started, ["tool/result:ToolNotStartedError", "step/end", "turn/end"]),
    (_started, ["tool/result:ToolOutcomeUnknownError", "step/end", "turn/end"]),
    (
        _mixed,
        [
            "tool/result:ToolOutcomeUnknownError",
            "tool/result:ToolNotStartedError",
            "tool/result:ToolOutcomeUnknownError",
            "step/end",
            "turn/end",
        ],
    ),
    # a call of a closed step is answered inside a step of its own (issue 25, item 9)
    (
        _not_started_in_closed_step,
        ["step/end", "step/start", "tool/result:ToolNotStartedError", "step/end", "turn/end"],
    ),
    (
        _started_in_closed_step,
        ["step/start", "tool/result:ToolOutcomeUnknownError", "step/end", "turn/end"],
    ),
]


@pytest.mark.parametrize(("script", "kinds"), CASES, ids=[c[0].__name__ for c in CASES])
def test_closers(script: Callable[[LogBuilder], None], kinds: list[str]) -> None:
    b = LogBuilder()
    script(b)
    closers = interrupted_turn_closers(b.events, session_id=SID)
    assert _kinds(closers) == kinds
    if closers:
        assert_closes(b.events, closers)
        assert closers[-1].data == {"turn": b.turn, "reason": {"kind": "interrupted"}}


def test_empty_log_has_no_closers() -> None:
    assert interrupted_turn_closers([], session_id=SID) == []


def test_session_id_is_required() -> None:
    with pytest.raises(ValueError):
        interrupted_turn_closers([], session_id="")


# -- the closers in detail --------------------------------------------------------------------


def test_outcome_unknown_result() -> None:
    b = LogBuilder()
    _started(b)
    call_seq = b.tool_calls["c1"]
    result, step_end, turn_end = interrupted_turn_closers(b.events, session_id=SID)
    assert result.type == "tool/result"
    assert result.surface_op == "append"
    assert result.source_event_seqs == (call_seq,)
    assert result.data["error"] == UNKNOWN
    assert (result.data["turn"], result.data["step"]) == (1, 1)
    message = result.data["message"]
    assert message["source"] == {"kind": "tool", "callId": "c1"}
    (block,) = message["content"]
    assert (block["type"], block["toolCallId"], block["isError"]) == ("tool-result", "c1", True)
    assert RETRY in text_of(UserMessage.model_validate(message))
    assert step_end.data == {"turn": 1, "step": 1}
    assert turn_end.data == {"turn": 1, "reason": {"kind": "interrupted"}}


def test_not_started_result() -> None:
    b = LogBuilder()
    _not_started(b)
    result = interrupted_turn_closers(b.events, session_id=SID)[0]
    assert result.source_event_seqs is None
    assert result.surface_op == "append"
    assert result.data["error"] == NOT_STARTED
    text = text_of(UserMessage.model_validate(result.data["message"]))
    assert "interrupted before it started" in text
    assert "may be retried" in text
    assert RETRY not in text


def test_not_started_result_of_a_closed_step_gets_a_step_of_its_own() -> None:
    """Issue 25, item 9: the reference wants every result inside an open step it names."""
    from tests.conformance import reference_invariants_problem

    b = LogBuilder()
    _not_started_in_closed_step(b)
    step_end, step_start, result, again, _ = interrupted_turn_closers(b.events, session_id=SID)
    assert step_end.data == {"turn": 1, "step": 2}
    assert step_start.data == again.data == {"turn": 1, "step": 3}
    assert (result.data["turn"], result.data["step"]) == (1, 3)
    assert result.data["error"] == NOT_STARTED
    closers = interrupted_turn_closers(b.events, session_id=SID)
    assert_closes(b.events, closers)
    assert reference_invariants_problem([*b.events, *closers]) is None


def test_started_result_of_a_closed_step_gets_a_step_of_its_own() -> None:
    """Issue 25, item 9, the corner: the call started (its tool/call is in the log) in a step
    already closed. The reference's rules take a result outside its call's step only with
    the code TOOL_NOT_STARTED; the name, the cited tool/call and the text keep the truth."""
    b = LogBuilder()
    _started_in_closed_step(b)
    b.step_start()  # step 2 open
    step_end, step_start, result, again, _ = interrupted_turn_closers(b.events, session_id=SID)
    assert step_end.data == {"turn": 1, "step": 2}
    assert step_start.data == again.data == {"turn": 1, "step": 3}
    assert (result.data["turn"], result.data["step"]) == (1, 3)
    assert result.data["error"] == CLOSED_STEP
    assert result.source_event_seqs == (b.tool_calls["c1"],)
    assert RETRY in text_of(UserMessage.model_validate(result.data["message"]))
    closers = interrupted_turn_closers(b.events, session_id=SID)
    assert_closes(b.events, closers)
    assert reference_invariants_problem([*b.events, *closers]) is None


def test_started_result_of_a_closed_step_with_no_step_open() -> None:
    """The same corner with the log ending right after the step/end."""
    b = LogBuilder()
    _started_in_closed_step(b)
    step_start, result, step_end, _ = interrupted_turn_closers(b.events, session_id=SID)
    assert step_start.data == step_end.data == {"turn": 1, "step": 2}
    assert result.data["error"] == CLOSED_STEP
    assert_closes(b.events, [step_start, result, step_end, _])


def test_results_follow_call_order() -> None:
    b = LogBuilder()
    _mixed(b)
    closers = interrupted_turn_closers(b.events, session_id=SID)
    call_ids = [c.data["message"]["source"]["callId"] for c in closers if c.type == "tool/result"]
    assert call_ids == ["c2", "c3", "c4"]
    assert [c.source_event_seqs for c in closers[:3]] == [
        (b.tool_calls["c2"],),
        None,
        (b.tool_calls["c4"],),
    ]


def test_closers_are_deterministic() -> None:
    b = LogBuilder()
    _mixed(b)
    first = interrupted_turn_closers(b.events, session_id=SID)
    again = interrupted_turn_closers(list(b.events), session_id=SID)
    assert first == again
    assert [c.to_json() for c in first] == [c.to_json() for c in again]
    other = interrupted_turn_closers(b.events, session_id="other")
    ids = [c.data["message"]["id"] for c in first if c.type == "tool/result"]
    other_ids = [c.data["message"]["id"] for c in other if c.type == "tool/result"]
    assert len(set(ids)) == len(ids)
    assert all(SID in i for i in ids)
    assert set(ids).isdisjoint(other_ids)


def test_closer_time_is_the_last_event_time() -> None:
    b = LogBuilder()
    _started(b)
    late = SessionEvent("embedder/note", b.next_seq, T0 + 99_999, {}, ignorable=True)
    closers = interrupted_turn_closers([*b.events, late], session_id=SID)
    assert {c.time for c in closers} == {T0 + 99_999}
    assert closers[0].seq == late.seq + 1


# -- property ---------------------------------------------------------------------------------


@settings(max_examples=80, deadline=None)
@given(plan=log_plans(compact=False), data=st.data())
def test_any_crash_point_is_repaired(plan: LogPlan, data: st.DataObject) -> None:
    events, slots = build_plan(plan)
    events, _ = build_plan(plan, data.draw(st.sets(st.integers(0, max(slots, 1)))))
    cut = data.draw(st.integers(0, len(events)))
    prefix = events[:cut]
    closers = interrupted_turn_closers(prefix, session_id=SID)
    assert closers == interrupted_turn_closers(prefix, session_id=SID)
    if closers:
        assert closers[-1].type == "turn/end"
        assert_closes(prefix, closers)
    else:
        assert unpaired_calls(derive_messages(prefix)) == []
