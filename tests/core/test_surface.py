"""The surface fold and `derive_messages` (docs/format.md, "Surface rules")."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from logs import T0, LogBuilder, LogPlan, build_plan, log_plans, text_of

from todo_sessions.core.envelope import SessionEvent
from todo_sessions.core.messages import AssistantMessage, UserMessage
from todo_sessions.core.structure import check_structure
from todo_sessions.core.surface import (
    Replacement,
    SurfaceFold,
    SurfaceState,
    derive_messages,
    fold_surface,
)
from todo_sessions.errors import InvalidEventError


def _replace(start: int, end: int) -> dict[str, object]:
    return {"op": "replace", "start": start, "end": end}


def _five_users() -> LogBuilder:
    """A log of five appended user messages, seqs 0..4, texts u0..u4."""
    b = LogBuilder()
    for i in range(5):
        b.user(f"u{i}")
    return b


# -- order ------------------------------------------------------------------------------------


def test_appends_keep_log_order() -> None:
    b = _five_users()
    fold = fold_surface(b.events)
    assert fold == SurfaceFold(seqs=(0, 1, 2, 3, 4), replacements=())
    assert [text_of(m) for m in derive_messages(b.events)] == ["u0", "u1", "u2", "u3", "u4"]


@pytest.mark.parametrize(
    ("start", "end", "seqs", "removed", "texts"),
    [
        (1, 3, (0, 5, 4), (1, 2, 3), ["u0", "new", "u4"]),
        (2, 2, (0, 1, 5, 3, 4), (2,), ["u0", "u1", "new", "u3", "u4"]),
        (0, 4, (5,), (0, 1, 2, 3, 4), ["new"]),
        (0, 0, (5, 1, 2, 3, 4), (0,), ["new", "u1", "u2", "u3", "u4"]),
        (3, 4, (0, 1, 2, 5), (3, 4), ["u0", "u1", "u2", "new"]),
    ],
)
def test_replace_takes_the_place_of_the_span(
    start: int, end: int, seqs: tuple[int, ...], removed: tuple[int, ...], texts: list[str]
) -> None:
    b = _five_users()
    b.compact(start, end, "new")
    fold = fold_surface(b.events)
    assert fold.seqs == seqs
    assert fold.replacements == (Replacement(5, start, end, removed),)
    assert [text_of(m) for m in derive_messages(b.events)] == texts


def test_replace_of_a_replacement_and_appends_after_it() -> None:
    b = _five_users()
    b.compact(1, 2, "s1")  # seq 5: 0 5 3 4
    b.user("u6")  # seq 6: 0 5 3 4 6
    b.compact(5, 3, "s2")  # seq 7: 0 7 4 6
    b.user("u8")
    fold = fold_surface(b.events)
    assert fold.seqs == (0, 7, 4, 6, 8)
    assert fold.replacements == (
        Replacement(5, 1, 2, (1, 2)),
        Replacement(7, 5, 3, (5, 3)),
    )
    assert [text_of(m) for m in derive_messages(b.events)] == ["u0", "s2", "u4", "u6", "u8"]


def test_replacing_events_of_every_surface_type() -> None:
    b = LogBuilder()
    b.turn_start()
    b.user("ask")  # 1
    b.step_start()
    b.assistant("thinking", calls=["c1"])  # 3
    b.tool_call("c1")  # 4
    b.tool_result("c1", "long output")  # 5
    # a shorter tool result replaces the long one (cites the node and its tool/call)
    b.tool_result("c1", "short", surface_op=_replace(5, 5), cites=[4, 5])  # 6
    # an assistant message replaces the whole exchange
    b.assistant("recap", surface_op=_replace(3, 6), cites=[3, 6])  # 7
    fold = fold_surface(b.events)
    assert fold.seqs == (1, 7)
    assert [r.seq for r in fold.replacements] == [6, 7]
    messages = derive_messages(b.events)
    assert [type(m) for m in messages] == [UserMessage, AssistantMessage]
    assert text_of(messages[1]) == "recap"


# -- what becomes a message -------------------------------------------------------------------


def test_each_surface_type_gives_its_message() -> None:
    b = LogBuilder()
    b.turn_start()
    user = b.user("please read")
    b.step_start()
    chunk = b.chunk("reading")
    assistant = b.assistant("reading", calls=[("c1", "read")], cites=[chunk.seq])
    b.tool_call("c1")
    result = b.tool_result("c1", "file text")
    b.todo(("read the file", "completed"))
    b.step_end()
    b.turn_end()
    messages = derive_messages(b.events)
    assert messages == [
        UserMessage.model_validate(user.data),
        AssistantMessage.model_validate(assistant.data["message"]),
        UserMessage.model_validate(result.data["message"]),
    ]
    assert messages[2].source.kind == "tool"
    assert messages[2].content[0].tool_call_id == "c1"
    assert fold_surface(b.events).seqs == (user.seq, assistant.seq, result.seq)


def test_empty_assistant_message_is_on_the_surface_but_yields_nothing() -> None:
    b = LogBuilder()
    b.turn_start()
    b.user("hi")
    b.step_start()
    empty = b.assistant("")
    b.step_end()
    b.turn_end()
    assert empty.seq in fold_surface(b.events).seqs
    assert [type(m) for m in derive_messages(b.events)] == [UserMessage]
    # and it can still be the endpoint of a replace
    b.compact(empty.seq, empty.seq, "gone")
    assert [text_of(m) for m in derive_messages(b.events)] == ["hi", "gone"]


def test_events_without_surface_op_are_not_on_the_surface() -> None:
    b = LogBuilder()
    b.user("kept")
    b.add("custom/note", {"x": 1}, ignorable=True)
    assert fold_surface(b.events).seqs == (0,)
    assert [text_of(m) for m in derive_messages(b.events)] == ["kept"]
    # a surface type without surfaceOp is refused, not silently left off (issue 25, item 3)
    with pytest.raises(InvalidEventError, match="requires a surfaceOp marker"):
        b.user("not surfaced", surface_op=None)


def test_unknown_ignorable_surface_event_holds_a_place_but_yields_no_message() -> None:
    b = LogBuilder()
    b.user("a")
    b.add("future/thing", {"x": 1}, surface_op="append", ignorable=True)
    b.user("b")
    assert fold_surface(b.events).seqs == (0, 1, 2)
    assert [text_of(m) for m in derive_messages(b.events)] == ["a", "b"]
    b.compact(1, 2, "c")
    assert [text_of(m) for m in derive_messages(b.events)] == ["a", "c"]


def test_messages_are_built_once_and_returned_in_a_fresh_list() -> None:
    state = SurfaceState()
    for event in _five_users().events:
        state.apply(event)
    first = state.messages()
    second = state.messages()
    assert first == second
    assert first is not second
    assert all(a is b for a, b in zip(first, second, strict=True))
    first.clear()
    assert len(state.messages()) == 5
    assert len(state) == 5
    assert 3 in state
    assert 9 not in state


def test_fold_without_messages() -> None:
    state = SurfaceState(build_messages=False)
    for event in _five_users().events:
        state.apply(event)
    assert state.seqs == (0, 1, 2, 3, 4)
    with pytest.raises(RuntimeError):
        state.messages()


def test_malformed_message_payload_is_an_invalid_event_error() -> None:
    b = LogBuilder(validate=False)
    b.add("user/message", {"id": "", "role": "user", "content": []}, surface_op="append")
    with pytest.raises(InvalidEventError) as info:
        derive_messages(b.events)
    assert info.value.field == "data"
    assert info.value.seq == 0


# -- replace errors ---------------------------------------------------------------------------


def _bad_event(seq: int, **kwargs: object) -> SessionEvent:
    data = {
        "id": "bad",
        "role": "user",
        "content": [{"type": "text", "text": "x"}],
        "source": {"kind": "user"},
    }
    return SessionEvent("user/message", seq, T0 + seq, data, **kwargs)


def _log_with_one_replaced() -> LogBuilder:
    """u0..u4 then seq 5 replaces 1..2: surface 0 5 3 4."""
    b = _five_users()
    b.compact(1, 2, "s")
    return b


ERROR_CASES: list[tuple[str, Callable[[int], SessionEvent], str, str]] = [
    (
        "unknown start",
        lambda s: _bad_event(s, surface_op=_replace(42, 3), source_event_seqs=[3]),
        "surfaceOp",
        "surface replace: start seq 42 not found in surface",
    ),
    (
        "unknown end",
        lambda s: _bad_event(s, surface_op=_replace(3, 41), source_event_seqs=[3]),
        "surfaceOp",
        "surface replace: end seq 41 not found in surface",
    ),
    (
        "start already replaced",
        lambda s: _bad_event(s, surface_op=_replace(1, 3), source_event_seqs=[1, 3]),
        "surfaceOp",
        "surface replace: start seq 1 not found in surface",
    ),
    (
        "end already replaced",
        lambda s: _bad_event(s, surface_op=_replace(0, 2), source_event_seqs=[0, 2]),
        "surfaceOp",
        "surface replace: end seq 2 not found in surface",
    ),
    (
        "start after end",
        lambda s: _bad_event(s, surface_op=_replace(4, 5), source_event_seqs=[4, 5]),
        "surfaceOp",
        "surface replace: start seq 4 comes after end seq 5",
    ),
    (
        "no citations",
        lambda s: _bad_event(s, surface_op=_replace(5, 4)),
        "sourceEventSeqs",
        "missing [5, 3, 4]",
    ),
    (
        "missing one citation",
        lambda s: _bad_event(s, surface_op=_replace(0, 3), source_event_seqs=[0, 3]),
        "sourceEventSeqs",
        "missing [5]",
    ),
    (
        "todo/write with surfaceOp",
        lambda s: SessionEvent(
            "todo/write", s, T0, {"todos": []}, surface_op="append", source_event_seqs=None
        ),
        "surfaceOp",
        "may not carry surfaceOp",
    ),
    (
        "turn/start with sourceEventSeqs",
        lambda s: SessionEvent("turn/start", s, T0, {"turn": 1}, source_event_seqs=[0]),
        "sourceEventSeqs",
        "may not carry sourceEventSeqs",
    ),
    (
        "tool/call with replace",
        lambda s: SessionEvent(
            "tool/call",
            s,
            T0,
            {"turn": 1, "step": 1, "callId": "c", "name": "n", "arguments": "{}"},
            surface_op=_replace(0, 0),
            source_event_seqs=[0],
        ),
        "surfaceOp",
        "may not carry surfaceOp",
    ),
    (
        "unknown non-ignorable type",
        lambda s: SessionEvent("mystery", s, T0, {}, surface_op="append"),
        "surfaceOp",
        "may not carry surfaceOp",
    ),
    (
        "seq already on the surface",
        lambda s: _bad_event(4, surface_op="append"),
        "surfaceOp",
        "seq 4 is already on the surface",
    ),
]


@pytest.mark.parametrize(
    ("make", "field", "text"),
    [case[1:] for case in ERROR_CASES],
    ids=[case[0] for case in ERROR_CASES],
)
def test_surface_errors_name_the_problem_and_change_nothing(
    make: Callable[[int], SessionEvent], field: str, text: str
) -> None:
    b = _log_with_one_replaced()
    state = SurfaceState()
    for event in b.events:
        state.apply(event)
    before = (state.seqs, state.replacements, state.messages())
    bad = make(b.next_seq)
    with pytest.raises(InvalidEventError) as info:
        state.apply(bad)
    error = info.value
    assert text in str(error)
    assert f"{bad.type!r} (seq {bad.seq})" in str(error)
    assert (error.field, error.event_type, error.seq) == (field, bad.type, bad.seq)
    assert (state.seqs, state.replacements, state.messages()) == before
    # and the state still works afterwards
    state.apply(_bad_event(b.next_seq, surface_op="append"))
    assert state.seqs == (*before[0], b.next_seq)


def test_fold_surface_raises_on_the_first_bad_event() -> None:
    b = _five_users()
    b.add(
        "user/message", _bad_event(5).data_copy(), surface_op=_replace(7, 7), source_event_seqs=[4]
    )
    with pytest.raises(InvalidEventError, match="start seq 7 not found in surface"):
        fold_surface(b.events)


# -- properties -------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(plan=log_plans(), data=st.data())
def test_todo_writes_inside_open_turns_never_change_derived_messages(
    plan: LogPlan, data: st.DataObject
) -> None:
    plain, slots = build_plan(plan)
    chosen = data.draw(st.sets(st.integers(0, max(slots - 1, 0))) if slots else st.just(set()))
    with_todos, _ = build_plan(plan, chosen)
    check_structure(plain)
    check_structure(with_todos)
    assert len(with_todos) == len(plain) + len(chosen)
    assert derive_messages(with_todos) == derive_messages(plain)


@settings(max_examples=40, deadline=None)
@given(plan=log_plans(max_turns=2), data=st.data())
def test_incremental_state_equals_derive_messages_of_every_prefix(
    plan: LogPlan, data: st.DataObject
) -> None:
    _, slots = build_plan(plan)
    chosen = data.draw(st.sets(st.integers(0, max(slots - 1, 0))) if slots else st.just(set()))
    events, _ = build_plan(plan, chosen)
    state = SurfaceState()
    for n, event in enumerate(events, start=1):
        state.apply(event)
        prefix = events[:n]
        assert state.messages() == derive_messages(prefix)
        fold = fold_surface(prefix)
        assert (state.seqs, state.replacements) == (fold.seqs, fold.replacements)
