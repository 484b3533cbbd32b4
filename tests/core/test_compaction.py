"""`Session.compact` and `Session.prune_tool_results` (docs/format.md, "Compaction"):
property tests over generated sessions, and the refusals."""

from __future__ import annotations

from typing import Any

import pytest
from anthropic.types.message_create_params import MessageCreateParamsStreaming
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st
from logs import LogBuilder, build_plan, log_plans
from openai.types.chat.completion_create_params import CompletionCreateParamsStreaming
from openai.types.responses.response_create_params import ResponseCreateParamsStreaming
from test_providers import assert_conforms

from todo_sessions import CompactionError, InvalidEventError, Session, SessionHeader
from todo_sessions.core.compaction import (
    PLAN_HEADING,
    PendingEvent,
    failed_compaction,
    is_summary_message,
)
from todo_sessions.core.messages import Message, TextBlock, ToolCallBlock, ToolResultBlock
from todo_sessions.core.surface import derive_messages
from todo_sessions.core.todos import TodoItem, current_todos
from todo_sessions.core.verify import errors_of, verify_events
from todo_sessions.harness.providers import anthropic, openai_chat, openai_responses

MARKS = {"completed": "[x]", "in_progress": "[~]", "pending": "[ ]"}


def header() -> SessionHeader:
    return SessionHeader(id="prop", created_at=0)


def ids(message: Message | None) -> tuple[list[str], list[str]]:
    if message is None:
        return [], []
    calls = [b.id for b in message.content if isinstance(b, ToolCallBlock)]
    results = [b.tool_call_id for b in message.content if isinstance(b, ToolResultBlock)]
    return calls, results


def cuts(nodes: list[Message | None], first: int, last: int) -> bool:
    """The oracle: does replacing ``first..last`` leave a call or a result without its
    partner? (Generated logs answer every call in its step.)"""
    where: dict[str, int] = {}
    for position, message in enumerate(nodes):
        calls, results = ids(message)
        for call_id in results:
            call = where.pop(call_id)
            if (first <= call <= last) != (first <= position <= last):
                return True
        for call_id in calls:
            where[call_id] = position
    return any(first <= call <= last for call in where.values())


def plan_lines(summary: Message) -> list[str] | None:
    blocks = [b.text for b in summary.content if isinstance(b, TextBlock)]
    plans = [b for b in blocks if b.startswith(PLAN_HEADING)]
    if not plans:
        return None
    assert len(plans) == 1
    lines = plans[0].splitlines()
    assert lines[1] == "[todos]"
    return lines[2:]


def expected_plan(todos: list[TodoItem] | None) -> list[str] | None:
    return [f"{MARKS[t.status]} {t.content}" for t in todos] if todos else None


def assert_provider_valid(messages: list[Message]) -> None:
    """Every result follows its call, every call has its result, and the three request
    formats conform to the official SDKs' request types."""
    open_calls: set[str] = set()
    for message in messages:
        calls, results = ids(message)
        for call_id in results:
            assert call_id in open_calls, f"result of {call_id} without its call"
            open_calls.discard(call_id)
        open_calls |= set(calls)
    assert not open_calls, f"calls without results: {open_calls}"
    assert_conforms(openai_chat.to_request(messages, model="m"), CompletionCreateParamsStreaming)
    assert_conforms(openai_responses.to_request(messages, model="m"), ResponseCreateParamsStreaming)
    assert_conforms(anthropic.to_request(messages, model="m"), MessageCreateParamsStreaming)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    plan=log_plans(compact=False, max_turns=3),
    todo_slots=st.sets(st.integers(0, 30), max_size=4),
    data=st.data(),
)
def test_compact_on_every_span(plan: Any, todo_slots: set[int], data: st.DataObject) -> None:
    events, _ = build_plan(plan, todo_slots)
    session = Session(header(), events, strict=True)
    surface = session.checkpoint_state().surface
    order = list(surface.seqs)
    assume(order)
    nodes = [surface.node_message(seq) for seq in order]
    first = data.draw(st.integers(0, len(order) - 1), label="first")
    last = data.draw(st.integers(first, len(order) - 1), label="last")
    before = list(session.derive_messages())
    todos = session.todos
    n = session.next_seq

    event("refused" if cuts(nodes, first, last) else "compacted")
    event("with todos" if todos else "no todos")
    if cuts(nodes, first, last):
        with pytest.raises(CompactionError) as refused:
            session.compact("S", start_seq=order[first], end_seq=order[last])
        assert refused.value.reason == "cuts-call" and refused.value.seq in order
        assert session.next_seq == n and list(session.events) == events
        assert list(session.derive_messages()) == before
        return

    result = session.compact("S", start_seq=order[first], end_seq=order[last])
    assert result.replaced == tuple(order[first : last + 1])
    after = list(session.derive_messages())
    summary = after[len([m for m in nodes[:first] if m is not None])]
    assert is_summary_message(summary) and summary.content[0] == TextBlock(text="S")
    tail = [m for m in nodes[last + 1 :] if m is not None]
    head = [m for m in nodes[:first] if m is not None]
    assert after == [*head, summary, *tail]
    if first == 0:
        assert after == [summary, *tail]  # the summary followed by the tail
    # the plan block lists exactly the standing todos; the todo projection is unchanged
    assert plan_lines(summary) == expected_plan(todos)
    assert session.todos == todos
    assert current_todos(list(session.events)) == todos
    # the history as of any seq before the compaction is what it was
    log = list(session.events)
    assert derive_messages(log[:n]) == before
    assert derive_messages(log) == after
    for upto in data.draw(st.lists(st.integers(0, n - 1), max_size=3), label="upto"):
        assert derive_messages(log[: upto + 1]) == derive_messages(events[: upto + 1])
    assert verify_events(log) == []
    assert_provider_valid(after)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    plan=log_plans(compact=False, max_turns=3),
    todo_slots=st.sets(st.integers(0, 30), max_size=4),
    keep=st.integers(0, 3),
)
def test_default_span_and_prune(plan: Any, todo_slots: set[int], keep: int) -> None:
    events, _ = build_plan(plan, todo_slots)
    session = Session(header(), events, strict=True)
    surface = session.checkpoint_state().surface
    order = list(surface.seqs)
    nodes = [surface.node_message(seq) for seq in order]
    prompts = [i for i, m in enumerate(nodes) if m is not None and m.source.kind == "user"]
    assume(prompts and prompts[-1] > 0)
    result = session.compact("S")
    assert result.replaced == tuple(order[: prompts[-1]])
    after = list(session.derive_messages())
    assert after == [after[0], *[m for m in nodes[prompts[-1] :] if m is not None]]
    assert plan_lines(after[0]) == expected_plan(session.todos)
    assert_provider_valid(after)

    # then prune (inside a turn, as a rewrite needs)
    if session.open_turn is None:
        session.append("turn/start", {"turn": session.last_turn + 1})
    results = [
        s
        for s in session.checkpoint_state().surface.seqs
        if surface_type(session, s) == "tool/result"
    ]
    pruned = session.prune_tool_results(keep_last=keep)
    expected = results[:-keep] if keep else results
    assert [p.original_seq for p in pruned.pruned] == expected
    final = list(session.derive_messages())
    assert len(final) == len(after)
    assert_provider_valid(final)
    assert verify_events(list(session.events)) == []
    assert session.prune_tool_results(keep_last=keep).pruned == ()  # already pruned


def surface_type(session: Session, seq: int) -> str:
    return session.checkpoint_state().surface.node_event(seq).type


# -- refusals ------------------------------------------------------------------------------------


def small_session() -> tuple[Session, LogBuilder]:
    b = LogBuilder()
    b.exchange("one", "c1")
    b.exchange("two", "c2")
    return Session(header(), b.events, strict=True), b


def test_refused_spans_name_the_seq_and_write_nothing() -> None:
    session, _ = small_session()
    order = list(session.checkpoint_state().surface.seqs)
    n = session.next_seq
    cases = [
        ({"start_seq": 9999, "end_seq": order[0]}, "not-on-surface", 9999),
        ({"start_seq": order[2], "end_seq": order[0]}, "reversed", order[2]),
        ({"start_seq": order[0], "end_seq": order[1]}, "cuts-call", order[1]),
        ({"start_seq": order[2], "end_seq": order[3]}, "cuts-call", order[2]),
    ]
    for span, reason, seq in cases:
        with pytest.raises(CompactionError) as refused:
            session.compact("S", **span)
        assert (refused.value.reason, refused.value.seq) == (reason, seq)
        assert f"seq {seq}" in str(refused.value)
    with pytest.raises(CompactionError, match="summary is empty"):
        session.compact("  ")
    with pytest.raises(CompactionError, match="summary is empty"):
        session.compact([{"type": "text", "text": " "}, {"type": "text", "text": ""}])
    assert session.next_seq == n


def test_nothing_before_the_last_prompt_is_an_empty_span() -> None:
    b = LogBuilder()
    b.exchange("only", "c1")
    session = Session(header(), b.events, strict=True)
    with pytest.raises(CompactionError) as refused:
        session.compact("S")
    assert refused.value.reason == "empty"


def test_a_span_may_not_reach_into_the_open_step_nor_hold_an_unanswered_call() -> None:
    b = LogBuilder()
    b.exchange("one")
    b.turn_start()
    b.user("two")
    b.step_start()
    b.assistant("calling", calls=["open1"])
    session = Session(header(), b.events, strict=True)
    order = list(session.checkpoint_state().surface.seqs)
    with pytest.raises(CompactionError) as refused:
        session.compact("S", end_seq=order[-1])
    assert refused.value.reason == "open-step" and refused.value.seq == order[-1]
    # the same log resumed from its state only (no step/start seen): known by turn and step
    resumed = Session(header(), state=session.checkpoint_state().copy())
    with pytest.raises(CompactionError) as again:
        resumed.compact("S", end_seq=order[-1])
    assert again.value.reason == "open-step"
    # the older turns can go; the kept tail is the open turn
    result = session.compact("S")
    assert result.replaced == tuple(order[: order.index(b.surface[-2])])


def test_append_all_is_all_or_nothing() -> None:
    session, _ = small_session()
    n = session.next_seq
    seen: list[int] = []
    session.subscribe(lambda e: seen.append(e.seq))
    good = PendingEvent("compaction/start", {"compactionId": "x", "turn": None})
    bad = PendingEvent("compaction/end", {"turn": None})  # no compactionId
    with pytest.raises(InvalidEventError, match="compactionId"):
        session.append_all([good, good, bad])
    assert session.next_seq == n and seen == []
    session.append_all([good, PendingEvent("compaction/end", {"compactionId": "x", "turn": None})])
    assert seen == [n, n + 1]


def test_verify_reports_a_replace_that_cuts_a_call_from_its_result() -> None:
    b = LogBuilder()
    b.exchange("one", "c1")
    b.exchange("two")
    cut = b.compact(b.surface[0], b.surface[1])  # the prompt and the call, not the result
    problems = verify_events(b.events)
    assert [(p.seq, p.kind, p.warning) for p in problems] == [(cut.seq, "surface", True)]
    op = cut.surface_op
    assert problems[0].message.startswith(f"surface replace {op.start}..{op.end}: it cuts")
    assert "cuts tool call 'c1'" in problems[0].message
    assert errors_of(problems) == []  # a warning: the log stays valid


def test_a_span_holding_a_call_without_its_result_yet_is_refused() -> None:
    b = LogBuilder()
    b.exchange("one")
    b.turn_start()
    b.user("two")
    b.step_start()
    call = b.assistant("calling", calls=["late"])
    b.step_end()  # the result is still to come
    session = Session(header(), b.events, strict=True)
    with pytest.raises(CompactionError) as refused:
        session.compact("S", end_seq=call.seq)
    assert (refused.value.reason, refused.value.seq) == ("cuts-call", call.seq)
    assert "'late'" in str(refused.value) and "no result yet" in str(refused.value)


def test_prune_refuses_a_negative_keep_last_and_an_empty_placeholder() -> None:
    b = LogBuilder()
    b.exchange("one", "c1")
    b.add("turn/start", {"turn": b.turn + 1})
    session = Session(header(), b.events, strict=True)
    for bad in ({"keep_last": -1}, {"placeholder": " "}):
        with pytest.raises(ValueError):
            session.prune_tool_results(**bad)  # type: ignore[arg-type]
    assert [p.original_seq for p in session.prune_tool_results(keep_last=0).pruned] == [
        e.seq for e in b.events if e.type == "tool/result"
    ]


def test_a_failed_attempt_is_recorded_as_start_and_end_with_the_error() -> None:
    b = LogBuilder()
    b.exchange("one", "c1")
    b.add("turn/start", {"turn": b.turn + 1})
    session = Session(header(), b.events, strict=True)
    before = list(session.derive_messages())
    start, end = failed_compaction(
        session.checkpoint_state(), "no summary", trigger="auto", tokens_before=90
    )
    cid, turn = start.data["compactionId"], session.open_turn
    assert turn == 2
    assert (start.type, end.type) == ("compaction/start", "compaction/end")
    assert start.data == {
        "compactionId": cid,
        "turn": turn,
        "trigger": "auto",
        "tokensBefore": 90,
    }
    assert end.data == {"compactionId": cid, "turn": turn, "error": "no summary"}
    session.append_all([start, end])  # valid records, and nothing replaced
    assert list(session.derive_messages()) == before
    again = failed_compaction(session.checkpoint_state(), "x", trigger="manual", tokens_before=None)
    assert "tokensBefore" not in again[0].data and again[0].data["compactionId"] != cid


@pytest.mark.parametrize("given", [None, 12_345])
def test_tokens_before_is_the_caller_s_count_when_given(given: int | None) -> None:
    """The start record carries the count the caller measured (a provider's usage), else the
    estimate of the history it replaces."""
    session, _ = small_session()
    n = session.next_seq
    session.compact("summary", tokens_before=given)
    start = session.events_from(n)[0]
    assert start.type == "compaction/start"
    if given is not None:
        assert start.payload["tokensBefore"] == given
    else:
        assert 0 < start.payload["tokensBefore"] != 12_345
