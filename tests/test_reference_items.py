"""Regression tests for issue 25's findings against the reference harness, one per item (items 1
and 2 are in tests/core/test_result_rewrites.py; the corpus itself in test_conformance.py)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from tests.factories import header
from todo_sessions import InvalidEventError, Session, SessionEvent, parse_lines
from todo_sessions._jsonl import header_line
from todo_sessions.core.catalog import validate_event
from todo_sessions.core.surface import derive_messages
from todo_sessions.core.todos import todo_list_problem
from todo_sessions.core.verify import verify_events
from todo_sessions.harness.tools.base import ToolContext
from todo_sessions.harness.tools.todo_write import TodoWriteTool

T = 1_700_000_000_000


def _line(kind: str, seq: int, data: Any, **extra: Any) -> str:
    wire = {"type": kind, "seq": seq, "time": T + seq, "data": data, **extra}
    return json.dumps(wire, separators=(",", ":"))


def _user(**changes: Any) -> dict[str, Any]:
    message = {
        "id": "u1",
        "role": "user",
        "content": [{"type": "text", "text": "hi"}],
        "source": {"kind": "user"},
    }
    message.update(changes)
    return {k: v for k, v in message.items() if v is not None}


def _import_error(*lines: str) -> InvalidEventError:
    with pytest.raises(InvalidEventError) as caught:
        parse_lines([header_line(header()), *lines])
    return caught.value


def _turn_lines() -> list[str]:
    """turn 1, step 1, an assistant message with call c1 and its tool/call: seqs 0-3."""
    step = {"turn": 1, "step": 1}
    assistant = {
        **step,
        "message": {
            "id": "a1",
            "role": "assistant",
            "content": [{"type": "tool-call", "id": "c1", "name": "read", "arguments": "{}"}],
            "source": {"kind": "model", "provider": "p", "model": "m"},
        },
    }
    return [
        _line("turn/start", 0, {"turn": 1}),
        _line("step/start", 1, step),
        _line("assistant/message", 2, assistant, surfaceOp="append", sourceEventSeqs=[]),
        _line("tool/call", 3, {**step, "callId": "c1", "name": "read", "arguments": "{}"}),
    ]


def _result(source: dict[str, Any]) -> dict[str, Any]:
    return {
        "turn": 1,
        "step": 1,
        "message": {
            "id": "r1",
            "role": "user",
            "source": source,
            "content": [
                {
                    "type": "tool-result",
                    "toolCallId": "c1",
                    "content": [{"type": "text", "text": "x"}],
                }
            ],
        },
    }


# -- item 3: surfaceOp required on every surface event, null refused --------------------------


@pytest.mark.parametrize(
    ("extra", "field", "text"),
    [
        ({}, "surfaceOp", "is surface-eligible and requires a surfaceOp marker"),
        ({"surfaceOp": None}, "surfaceOp", "carries an invalid surfaceOp: null"),
        (
            {"surfaceOp": "append", "sourceEventSeqs": None},
            "sourceEventSeqs",
            "carries an invalid sourceEventSeqs: null",
        ),
    ],
)
def test_item3_import_refuses_a_surface_event_without_a_valid_surface_op(
    extra: dict[str, Any], field: str, text: str
) -> None:
    error = _import_error(_line("user/message", 0, _user(), **extra))
    assert text in str(error) and "line 2" in str(error) and "(seq 0)" in str(error)
    with pytest.raises(InvalidEventError) as caught:
        validate_event(SessionEvent.from_json(_line("user/message", 0, _user(), **extra)))
    assert caught.value.field == field and caught.value.seq == 0


def test_item3_null_surface_fields_on_other_types_are_not_eligible() -> None:
    for key in ("surfaceOp", "sourceEventSeqs"):
        with pytest.raises(InvalidEventError, match=f"may not carry {key}") as caught:
            SessionEvent.from_json(_line("turn/start", 4, {"turn": 1}, **{key: None}))
        assert (caught.value.seq, caught.value.field) == (4, key)


def test_item3_live_and_seeded_sessions_refuse_a_surface_event_without_surface_op() -> None:
    with pytest.raises(InvalidEventError, match="requires a surfaceOp"):
        Session(header()).append("user/message", _user())
    event = SessionEvent("user/message", 0, T, _user())
    with pytest.raises(InvalidEventError, match="requires a surfaceOp"):
        Session(header(), [event])


# -- item 4: no defaults for required fields ---------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "data", "field"),
    [
        ("user/message", _user(role=None), "data.role"),
        (
            "assistant/message",
            {
                "turn": 1,
                "step": 1,
                "message": {
                    "id": "a1",
                    "role": "assistant",
                    "content": [],
                    "source": {"provider": "p", "model": "m"},
                },
            },
            "data.message.source.kind",
        ),
        (
            "assistant/message",
            {
                "turn": 1,
                "step": 1,
                "message": {
                    "id": "a1",
                    "role": "assistant",
                    "content": [],
                    "source": {"kind": "model", "provider": "", "model": "m"},
                },
            },
            "data.message.source.provider",
        ),
    ],
)
def test_item4_missing_required_fields_are_refused(kind: str, data: Any, field: str) -> None:
    error = _import_error(
        _line("turn/start", 0, {"turn": 1}), _line(kind, 1, data, surfaceOp="append")
    )
    assert f"(seq 1): {field}:" in str(error)
    with pytest.raises(InvalidEventError) as caught:
        validate_event(SessionEvent(kind, 1, T, data, surface_op="append"))
    assert (caught.value.seq, caught.value.field) == (1, field)


# -- item 8: import accepts exactly what verify and the projections accept -------------------


def test_item8_a_result_source_without_kind_does_not_import() -> None:
    bad = _line("tool/result", 4, _result({"callId": "c1"}), surfaceOp="append")
    error = _import_error(*_turn_lines(), bad)
    assert "line 6" in str(error) and "data.message.source.kind" in str(error)
    good = _line("tool/result", 4, _result({"kind": "tool", "callId": "c1"}), surfaceOp="append")
    _, events = parse_lines([header_line(header()), *_turn_lines(), good])
    assert verify_events(events) == []
    assert [m.id for m in derive_messages(events)] == ["a1", "r1"]


# -- item 10: error texts quote content as JSON strings ----------------------------------------


def test_item10_duplicate_content_is_quoted_as_json() -> None:
    twice = [{"content": 'say "hi"', "status": "pending"}] * 2
    assert todo_list_problem(twice) == 'todos[1]: duplicate content "say \\"hi\\""'
    bad_status = [{"content": "a", "status": "it's done"}]
    assert todo_list_problem(bad_status).endswith('got "it\'s done"')  # type: ignore[union-attr]

    context = ToolContext(session=None, call_id="c1")
    result = asyncio.run(TodoWriteTool().run({"todos": twice}, context))
    assert result.is_error
    assert 'duplicate content "say \\"hi\\""' in result.content[0]["text"]


# -- item 7: the reference's whole vocabulary -------------------------------------------------


def test_item7_reference_types_are_known_and_their_fields_checked() -> None:
    start = _line("turn/start", 0, {"turn": 1})
    goal = {"kind": "goal/change", "version": 1, "operation": "clear", "cleared": {"id": "g"}}
    _, events = parse_lines(
        [
            header_line(header()),
            start,
            _line("goal/change", 1, goal),
            _line("plan/mode", 2, {"active": True}),
            _line("session/title", 3, {"title": "t"}),  # no field is required, as there
        ]
    )
    assert [e.type for e in events][1:] == ["goal/change", "plan/mode", "session/title"]
    error = _import_error(start, _line("plan/mode", 1, {"active": "yes"}))
    assert "(seq 1): data.active: Input should be a valid boolean" in str(error)
    error = _import_error(start, _line("sandbox/mode", 1, {"mode": "anything"}))
    assert "data.mode" in str(error)
    with pytest.raises(InvalidEventError, match="may not carry surfaceOp"):
        validate_event(SessionEvent("goal/change", 1, T, goal, surface_op="append"))


# -- item 9: the store's crash repair closes a call of a closed step as the reference wants ----


def _started_in_a_closed_step() -> list[SessionEvent]:
    from logs import LogBuilder

    b = LogBuilder()
    b.turn_start()
    b.user("go")
    b.step_start()
    b.assistant(calls=["c1"])
    b.tool_call("c1")
    b.step_end()  # the step closed without its result, then the process died
    return b.events


def test_item9_the_store_repairs_a_started_call_of_a_closed_step_as_the_reference_wants(
    tmp_path: Any,
) -> None:
    from tests.conformance import reference_invariants_problem
    from todo_sessions import SessionStore
    from todo_sessions.core.checkpoint import fold

    events = _started_in_a_closed_step()
    assert reference_invariants_problem(events) is None

    async def run() -> None:
        async with SessionStore(f"sqlite:///{tmp_path}/s.db") as store:
            for sid in ("load", "resume"):
                await store.create(header(sid))
                await store.append(sid, events)
            await store.write_checkpoint("resume", fold(events))
            inspected = await store.inspect("load")
            loaded = await store.load("load")
            resumed = await store.resume_state("resume")
            assert resumed.from_checkpoint is not None  # closers_for, from the folded state
            for closers in (inspected.closers, loaded.closers):
                assert [c.type for c in closers] == [
                    "step/start",
                    "tool/result",
                    "step/end",
                    "turn/end",
                ]
                result = closers[1]
                assert result.data["error"] == {
                    "name": "ToolOutcomeUnknownError",
                    "code": "TOOL_NOT_STARTED",
                }
                assert result.source_event_seqs == (events[-2].seq,)
                assert reference_invariants_problem([*events, *closers]) is None
                Session(header("load"), [*events, *closers], strict=True)
            assert [c.to_dict() for c in resumed.closers] == [
                {**c.to_dict(), "data": _renamed(c.data, "load", "resume")} for c in loaded.closers
            ]
            assert [e.to_dict() for e in (await store.read("load")).events[len(events) :]] == [
                c.to_dict() for c in loaded.closers
            ]

    asyncio.run(run())


def _renamed(data: Any, old: str, new: str) -> Any:
    return json.loads(json.dumps(data).replace(f'"{old}:repair:', f'"{new}:repair:'))
