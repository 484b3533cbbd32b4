"""Session events as ACP ``session/update`` payloads, checked against golden JSON.

See docs/design.md, "ACP bridge".

Goldens live in ``tests/acp_bridge/golden``; regenerate them with
``UPDATE_GOLDEN=1 pytest tests/acp_bridge`` and review the diff.
Without the variable the tests only compare.

(No ``__init__.py`` in this directory: with ``tests`` on ``sys.path`` it would make this
directory shadow the SDK's ``acp`` package.)
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from acp.schema import SessionNotification
from acp.utils import serialize_params
from logs import T0, LogBuilder

from todo_sessions.acp.mapping import (
    UpdateMapper,
    event_to_updates,
    replay_updates,
    todos_to_plan,
    update_to_wire,
)
from todo_sessions.core.envelope import SessionEvent
from todo_sessions.core.repair import interrupted_turn_closers
from todo_sessions.core.todos import TodoItem

GOLDEN = Path(__file__).parent / "golden"


def assert_golden(name: str, value: Any) -> None:
    """Compare ``value`` with ``golden/<name>.json``; rewrite the file when UPDATE_GOLDEN=1."""
    path = GOLDEN / f"{name}.json"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        return
    assert path.exists(), f"missing golden {path.name}; run with UPDATE_GOLDEN=1 to create it"
    assert value == json.loads(path.read_text(encoding="utf-8")), f"differs from {path.name}"


# -- single events ------------------------------------------------------------------------------

STEP = {"turn": 1, "step": 1}
MODEL = {"kind": "model", "provider": "test", "model": "scripted"}


def event(type: str, seq: int, data: Any, **envelope: Any) -> SessionEvent:
    return SessionEvent(type, seq, T0 + seq, data, **envelope)


def user_event(seq: int = 1) -> SessionEvent:
    content = [
        {"type": "text", "text": "fix the failing test"},
        {"type": "image", "mediaType": "image/png", "data": "iVBORw0KGgo="},
        {"type": "text", "text": ""},
    ]
    data = {"id": "u1", "role": "user", "content": content, "source": {"kind": "user"}}
    return event("user/message", seq, data, surface_op="append")


def assistant_event(seq: int = 4) -> SessionEvent:
    content = [
        {"type": "reasoning", "text": "The test imports a renamed function."},
        {"type": "text", "text": "Let me read the test."},
        {"type": "tool-call", "id": "call-1", "name": "read", "arguments": '{"path": "t.py"}'},
    ]
    message = {"id": "a1", "role": "assistant", "content": content, "source": MODEL}
    return event(
        "assistant/message", seq, {**STEP, "message": message}, surface_op="append",
        source_event_seqs=[],
    )  # fmt: skip


def call_event(
    seq: int = 5, arguments: str = '{"path": "t.py"}', name: str = "read"
) -> SessionEvent:
    data = {**STEP, "callId": "call-1", "name": name, "arguments": arguments}
    return event("tool/call", seq, data)


def result_event(
    seq: int = 6, *, text: str = "def test_x(): ...", is_error: bool = False, error: bool = False
) -> SessionEvent:
    block: dict[str, Any] = {
        "type": "tool-result",
        "toolCallId": "call-1",
        "content": [{"type": "text", "text": text}],
    }
    if is_error:
        block["isError"] = True
    data: dict[str, Any] = {
        **STEP,
        "message": {
            "id": "r1",
            "role": "user",
            "source": {"kind": "tool", "callId": "call-1"},
            "content": [block],
        },
    }
    if error:
        data["error"] = {"name": "ToolError", "code": "TOOL_FAILED"}
    return event("tool/result", seq, data, surface_op="append", source_event_seqs=[5])


def todo_event(seq: int, *items: tuple[str, str]) -> SessionEvent:
    return event("todo/write", seq, {"todos": [{"content": c, "status": s} for c, s in items]})


def wire(updates: list[Any]) -> list[dict[str, Any]]:
    return [update_to_wire(u) for u in updates]


def kinds(updates: list[Any]) -> list[str]:
    return [u.session_update for u in updates]


THREE = [
    TodoItem(content="Read the failing test", status="completed"),
    TodoItem(content="Fix the import", status="in_progress"),
    TodoItem(content="Run the suite", status="pending"),
]

GOLDEN_CASES: dict[str, Callable[[], Any]] = {
    "plan_three_statuses": lambda: update_to_wire(todos_to_plan(THREE)),
    "plan_empty": lambda: update_to_wire(todos_to_plan([])),
    "user_message_chunks": lambda: wire(event_to_updates(user_event())),
    "agent_message_chunk": lambda: update_to_wire(event_to_updates(assistant_event())[1]),
    "agent_thought_chunk": lambda: update_to_wire(event_to_updates(assistant_event())[0]),
    "tool_call_start": lambda: wire(event_to_updates(call_event())),
    "tool_call_update_completed": lambda: wire(event_to_updates(result_event())),
    "tool_call_update_failed": lambda: wire(
        event_to_updates(result_event(text="FileNotFoundError: t.py", is_error=True))
    ),
}


@pytest.mark.parametrize("name", sorted(GOLDEN_CASES))
def test_golden(name: str) -> None:
    assert_golden(name, GOLDEN_CASES[name]())


def all_updates() -> list[Any]:
    return [
        todos_to_plan(THREE),
        todos_to_plan([]),
        *event_to_updates(user_event()),
        *event_to_updates(assistant_event()),
        *event_to_updates(call_event()),
        *event_to_updates(result_event()),
        *event_to_updates(result_event(is_error=True)),
    ]


def test_update_to_wire_is_what_the_sdk_sends() -> None:
    for update in all_updates():
        sent = serialize_params(SessionNotification(session_id="s1", update=update))
        assert update_to_wire(update) == sent["update"]


def test_wire_json_parses_back_on_the_client_side() -> None:
    for update in all_updates():
        note = SessionNotification.model_validate(
            {"sessionId": "s1", "update": update_to_wire(update)}
        )
        assert note.update == update


def test_plan_entries_follow_the_list() -> None:
    plan = todos_to_plan(THREE)
    assert plan.session_update == "plan"
    assert [(e.content, e.status, e.priority) for e in plan.entries] == [
        ("Read the failing test", "completed", "medium"),
        ("Fix the import", "in_progress", "medium"),
        ("Run the suite", "pending", "medium"),
    ]
    assert update_to_wire(todos_to_plan([])) == {"sessionUpdate": "plan", "entries": []}


def test_user_message_chunks_text_and_image_skip_empty_text() -> None:
    updates = event_to_updates(user_event(seq=7))
    assert kinds(updates) == ["user_message_chunk", "user_message_chunk"]
    assert [u.content.type for u in updates] == ["text", "image"]
    assert {u.message_id for u in updates} == {"seq-7"}


def test_assistant_message_text_and_reasoning_no_tool_call_blocks() -> None:
    updates = event_to_updates(assistant_event(seq=9))
    assert kinds(updates) == ["agent_thought_chunk", "agent_message_chunk"]
    assert [u.message_id for u in updates] == ["seq-9-thought", "seq-9"]


def test_tool_call_defaults() -> None:
    (start,) = event_to_updates(call_event())
    assert (start.tool_call_id, start.title, start.kind, start.status) == (
        "call-1",
        "read",
        "other",
        "in_progress",
    )
    assert start.raw_input == {"path": "t.py"}


def test_tool_call_arguments_that_do_not_parse_are_passed_raw() -> None:
    (start,) = event_to_updates(call_event(arguments='{"path": '))
    assert start.raw_input == '{"path": '
    assert update_to_wire(start)["rawInput"] == '{"path": '


def test_present_call_is_used_when_provided() -> None:
    seen: list[tuple[str, Any]] = []

    def present(name: str, args: Any) -> dict[str, Any]:
        seen.append((name, args))
        return {
            "title": f"Read {args['path']}",
            "kind": "read",
            "raw_input": {"file": args["path"]},
        }

    (start,) = event_to_updates(call_event(), present_call=present)
    assert seen == [("read", {"path": "t.py"})]
    assert update_to_wire(start) == {
        "sessionUpdate": "tool_call",
        "toolCallId": "call-1",
        "title": "Read t.py",
        "kind": "read",
        "status": "in_progress",
        "rawInput": {"file": "t.py"},
    }


def test_present_call_todo_write_shape() -> None:
    args = '{"todos": [{"content": "a", "status": "pending"}]}'

    def present(name: str, args: Any) -> dict[str, Any] | None:
        if name != "todo_write":
            return None
        return {"title": "Update todo list", "kind": "other", "raw_input": args["todos"]}

    (start,) = event_to_updates(call_event(name="todo_write", arguments=args), present_call=present)
    assert (start.title, start.kind) == ("Update todo list", "other")
    assert start.raw_input == [{"content": "a", "status": "pending"}]
    (other,) = event_to_updates(call_event(), present_call=present)
    assert (other.title, other.kind, other.raw_input) == ("read", "other", {"path": "t.py"})


def test_present_call_partial_or_unknown_kind_falls_back() -> None:
    (start,) = event_to_updates(call_event(), present_call=lambda n, a: {"kind": "teleport"})
    assert (start.title, start.kind, start.raw_input) == ("read", "other", {"path": "t.py"})
    (start,) = event_to_updates(call_event(), present_call=lambda n, a: {})
    assert (start.title, start.kind) == ("read", "other")


@pytest.mark.parametrize(
    ("is_error", "error", "status"),
    [(False, False, "completed"), (True, False, "failed"), (False, True, "failed")],
)
def test_tool_result_status(is_error: bool, error: bool, status: str) -> None:
    (update,) = event_to_updates(result_event(is_error=is_error, error=error))
    assert (update.session_update, update.tool_call_id, update.status) == (
        "tool_call_update",
        "call-1",
        status,
    )
    assert [c.content.text for c in update.content] == ["def test_x(): ..."]


def test_other_events_produce_nothing() -> None:
    others = [
        event("turn/start", 0, {"turn": 1}),
        event("step/start", 1, STEP),
        event(
            "assistant/chunk", 2, {**STEP, "chunk": {"type": "text-delta", "index": 0, "text": "x"}}
        ),
        event("request/header", 3, {"model": "scripted"}),
        event("request/context", 4, {"tools": []}),
        event("step/end", 5, STEP),
        event("turn/end", 6, {"turn": 1, "reason": {"kind": "completed"}}),
        event("session/end-seed", 7, {}),
        event("vendor/telemetry", 8, {"anything": [1, 2]}, ignorable=True),
    ]
    for other in others:
        assert event_to_updates(other) == []
    # A replay shows a streamed delta, like the live stream did (no message cites it here).
    assert [(u.session_update, u.message_id) for u in replay_updates(others)] == [
        ("agent_message_chunk", "seq-2")
    ]


# -- whole logs ---------------------------------------------------------------------------------


def test_replay_follows_log_order() -> None:
    b = LogBuilder()
    b.turn_start()
    b.user("fix it")
    b.todo(("read", "in_progress"), ("fix", "pending"))
    b.step_start()
    b.chunk("Reading")
    b.assistant("Reading", calls=["c1"], cites=[b.next_seq - 1])
    b.tool_call("c1")
    b.tool_result("c1", "contents")
    b.step_end()
    b.todo(("read", "completed"), ("fix", "in_progress"))
    b.text_step("Fixed.")
    b.todo()
    b.turn_end()
    updates = replay_updates(b.events)
    assert [(u.session_update, getattr(u, "message_id", None)) for u in updates] == [
        ("user_message_chunk", "seq-1"),
        ("plan", None),
        ("agent_message_chunk", "seq-4"),  # the streamed delta; its message sends nothing more
        ("tool_call", None),
        ("tool_call_update", None),
        ("plan", None),
        ("agent_message_chunk", "seq-11"),
        ("plan", None),
    ]
    assert replay_updates(b.events) == updates  # deterministic, ids stable


def test_each_todo_write_is_a_plan_and_the_last_one_wins() -> None:
    events = [
        event("turn/start", 0, {"turn": 1}),
        todo_event(1, ("a", "in_progress"), ("b", "pending")),
        todo_event(2, ("a", "completed"), ("b", "in_progress")),
        todo_event(3, ("a", "completed"), ("b", "completed")),
        todo_event(4),
    ]
    plans = replay_updates(events)
    assert kinds(plans) == ["plan"] * 4
    assert [[(e.content, e.status) for e in p.entries] for p in plans] == [
        [("a", "in_progress"), ("b", "pending")],
        [("a", "completed"), ("b", "in_progress")],
        [("a", "completed"), ("b", "completed")],
        [],
    ]


def test_replaced_surface_events_are_still_replayed() -> None:
    b = LogBuilder()
    b.exchange("first question", answer="first answer")
    b.turn_start()
    first, last = b.surface[0], b.surface[-1]
    b.compact(first, last, "summary of the first turn")
    b.user("second question")
    b.turn_end()
    texts = [u.content.text for u in replay_updates(b.events)]
    assert texts == [
        "first question",
        "first answer",
        "summary of the first turn",
        "second question",
    ]


def test_result_of_a_call_that_never_started_shows_nothing() -> None:
    b = LogBuilder()
    b.turn_start()
    b.user("go")
    b.step_start()
    b.assistant(calls=[("c1", "read"), ("c2", "write")])
    b.tool_call("c1")
    events = b.events + interrupted_turn_closers(b.events, session_id="s1")
    updates = replay_updates(events, present_call=lambda n, a: {"title": f"tool {n}"})
    assert [(u.session_update, u.tool_call_id, u.status) for u in updates[1:]] == [
        ("tool_call", "c1", "in_progress"),
        ("tool_call_update", "c1", "failed"),
    ]  # c2 never started: the client was never shown it, so no update (and no invented start)
    # Event by event, without the log's context, the result is only an update.
    assert kinds(event_to_updates(events[-3])) == ["tool_call_update"]


# -- the replay's fast path (`UpdateMapper.feed_wire`) -----------------------------------------


class _ModelsForbidden(UpdateMapper):
    """A mapper whose model path fails: what `feed_wire` answers came from its fast path."""

    def feed(self, event: SessionEvent) -> list[Any]:
        raise AssertionError(f"{event.type} (seq {event.seq}) took the models' path")


def assert_wire_equals_models(
    events: list[SessionEvent], *, present_call: Any = None, fast: bool = False
) -> list[dict[str, Any]]:
    """Feed ``events`` through `feed_wire` and through `feed` + `update_to_wire`: the same
    JSON text, key order included, and every update valid under the SDK's schema. With
    ``fast``, the hot kinds must not have taken the models' path."""
    models = UpdateMapper(present_call=present_call)
    fast_mapper = UpdateMapper(present_call=present_call)
    forbidden = _ModelsForbidden(present_call=present_call)
    sent: list[dict[str, Any]] = []
    for e in events:
        expected = [update_to_wire(u) for u in models.feed(e)]
        got = fast_mapper.feed_wire(e)
        assert json.dumps(got) == json.dumps(expected), (e.type, e.seq)
        if fast and e.type in HOT_KINDS:
            assert forbidden.feed_wire(e) == expected, (e.type, e.seq)
        elif fast:
            UpdateMapper.feed(forbidden, e)  # keep its state in step
        for update in got:
            notification = {"sessionId": "s1", "update": update}
            SessionNotification.model_validate(notification)
        sent.extend(got)
    return sent


HOT_KINDS = {"user/message", "assistant/message", "assistant/chunk", "tool/call", "tool/result"}


def test_feed_wire_is_the_models_json_for_a_whole_log() -> None:
    b = LogBuilder()
    b.turn_start()
    b.user('fix it, s\'il vous plaît ✓ "quoted"\n\ttabbed')
    b.todo(("read", "in_progress"), ("fix", "pending"))
    b.step_start()
    first = b.chunk("Reading").seq
    b.add(
        "assistant/chunk",
        {"turn": b.turn, "step": b.step, "chunk": {"type": "reasoning-delta", "text": "hmm"}},
    )
    b.add("assistant/chunk", {"turn": b.turn, "step": b.step, "chunk": {"type": "x", "text": ""}})
    b.assistant("Reading", calls=["c1", "c2"], cites=[first])
    b.tool_call("c1")
    b.tool_result("c1", "contents é")
    b.step_end()
    b.text_step("Fixed.")
    b.step_start()
    b.chunk("never cited")
    b.step_end()
    b.turn_end()
    sent = assert_wire_equals_models(b.events, fast=True)
    assert [u["sessionUpdate"] for u in sent].count("agent_message_chunk") >= 2
    assert {"seq-1", f"seq-{first}", f"seq-{first}-thought"} <= {u.get("messageId") for u in sent}


def test_feed_wire_single_events_and_edge_payloads() -> None:
    shown = [event("turn/start", 0, {"turn": 1}), call_event(5)]
    cases = [
        [user_event()],
        [assistant_event()],
        [*shown, result_event(is_error=True)],
        [*shown, result_event(error=True)],
        [*shown, result_event(text="")],
        [result_event()],  # a call never shown: nothing
        [todo_event(1, ("a", "pending")), todo_event(2)],
    ]
    for events in cases:
        assert_wire_equals_models(events, fast=True)
    for arguments in ["not json", "null", "[1, 2.5, -0.0, 12345678901234567890123]", '{"k": {}}']:
        assert_wire_equals_models([call_event(arguments=arguments)])
    for arguments in ['{"x": NaN}', '{"x": 1e999}', '{"s": "\\ud800 lone"}']:
        assert_wire_equals_models([call_event(arguments=arguments)])


def test_feed_wire_with_present_call() -> None:
    presents = [
        lambda n, a: {"title": f"Read {a['path']}", "kind": "read"},
        lambda n, a: {"title": "x", "kind": "no-such-kind"},
        lambda n, a: {"raw_input": {"shown": a}},
        lambda n, a: None,
    ]
    for present in presents:
        events = [call_event(), result_event()]
        assert_wire_equals_models(events, present_call=present)
