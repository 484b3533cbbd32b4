"""The agent loop with a scripted model: structure, surface, cancellation.

See docs/design.md, "Agent loop and tools".
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from factories import call_ids

from todo_sessions import Session, SessionHeader
from todo_sessions.core.structure import check_structure
from todo_sessions.core.surface import derive_messages
from todo_sessions.harness.loop import AgentLoop
from todo_sessions.harness.model import ScriptedModel, ScriptedResponse
from todo_sessions.harness.tools import TodoWriteTool, ToolContext, ToolRegistry, ToolResult

PLAN = {
    "todos": [{"content": "look", "status": "in_progress"}, {"content": "fix", "status": "pending"}]
}


class Tool:
    """A test tool: returns text, or sleeps, or raises."""

    def __init__(self, name: str, *, sleep: float = 0.0, fail: bool = False) -> None:
        self.name = name
        self.description = f"test tool {name}"
        self.parameters: dict[str, Any] = {"type": "object"}
        self.sleep = sleep
        self.fail = fail
        self.started = asyncio.Event()
        self.runs = 0

    async def run(self, args: dict[str, Any], context: ToolContext) -> ToolResult:
        self.runs += 1
        self.started.set()
        await asyncio.sleep(self.sleep)
        if self.fail:
            raise RuntimeError("disk on fire")
        return ToolResult.text(f"{self.name} ran with {args}")


def make(responses: list[ScriptedResponse], *tools: Tool, max_steps: int = 20) -> AgentLoop:
    registry = ToolRegistry()
    registry.register(TodoWriteTool())
    for tool in tools:
        registry.register(tool)
    session = Session(SessionHeader(id="loop", created_at=0), strict=True)
    return AgentLoop(session, ScriptedModel(responses), registry, max_steps=max_steps)


def kinds(loop: AgentLoop) -> list[str]:
    return [e.type for e in loop.session.events]


async def test_two_step_turn_with_tool_calls_has_the_spec_structure() -> None:
    read = Tool("read")
    loop = make(
        [
            ScriptedResponse(
                text="Plan first.", tool_calls=[("todo_write", PLAN), ("read", {"p": 1})]
            ),
            ScriptedResponse(text="All good."),
        ],
        read,
    )
    outcome = await loop.run_turn("fix it")
    assert (outcome.turn, outcome.reason, outcome.steps, outcome.text) == (
        1,
        "completed",
        2,
        "All good.",
    )
    events = list(loop.session.events)
    check_structure(events)
    assert kinds(loop) == [
        "turn/start", "user/message",
        "step/start", "assistant/chunk", "assistant/chunk", "assistant/chunk", "assistant/chunk",
        "assistant/message",
        "tool/call", "todo/write", "tool/result",
        "tool/call", "tool/result",
        "step/end",
        "step/start", "assistant/chunk", "assistant/chunk", "assistant/message", "step/end",
        "turn/end",
    ]  # fmt: skip
    first = events[7]
    assert first.source_event_seqs == (3, 4, 5, 6)
    assert [b["type"] for b in first.data["message"]["content"]] == [
        "text",
        "tool-call",
        "tool-call",
    ]
    for result in (events[10], events[12]):
        call = events[result.source_event_seqs[0]]
        assert call.type == "tool/call"
        assert result.data["message"]["source"]["callId"] == call.data["callId"]
    assert loop.session.todos is not None and loop.session.todos[0].content == "look"


async def test_model_sees_exactly_the_derived_messages_without_todo_data() -> None:
    loop = make(
        [
            ScriptedResponse(tool_calls=[("todo_write", PLAN)]),
            ScriptedResponse(tool_calls=[("todo_write", {"todos": []})]),
            ScriptedResponse(text="done"),
        ]
    )
    await loop.run_turn("go")
    model = loop.model
    assert isinstance(model, ScriptedModel)
    events = list(loop.session.events)
    for call_index, shown in enumerate(model.calls):
        step_start = [e for e in events if e.type == "step/start"][call_index]
        assert shown == derive_messages(events[: step_start.seq + 1])
    messages = loop.session.derive_messages()
    todo_seqs = {e.seq for e in events if e.type == "todo/write"}
    assert len(todo_seqs) == 2
    dumped = [m.model_dump(mode="json", by_alias=True) for m in messages]
    assert [m["role"] for m in dumped] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    without_todos = [e for e in events if e.type != "todo/write"]
    assert derive_messages(without_todos) == messages


async def test_cancellation_mid_tool_ends_the_turn_aborted_with_a_valid_history() -> None:
    slow = Tool("slow", sleep=30)
    loop = make([ScriptedResponse(text="working", tool_calls=[("slow", {}), ("slow", {})])], slow)
    task = asyncio.create_task(loop.run_turn("do the slow thing"))
    await asyncio.wait_for(slow.started.wait(), 5)
    loop.cancel()
    outcome = await asyncio.wait_for(task, 5)
    assert outcome.reason == "aborted" and slow.runs == 1
    events = list(loop.session.events)
    check_structure(events)
    results = [e for e in events if e.type == "tool/result"]
    assert [r.data["error"]["code"] for r in results] == ["TOOL_CANCELLED", "TOOL_NOT_STARTED"]
    assert events[-1].data["reason"] == {"kind": "aborted"}
    calls, answered = call_ids(loop.session.derive_messages())
    assert calls == answered


async def test_cancellation_mid_stream_keeps_the_partial_message() -> None:
    loop = make(
        [
            ScriptedResponse(
                text="one two three four five six", tool_calls=[("todo_write", PLAN)], delay=0.05
            )
        ]
    )
    two_chunks = asyncio.Event()
    loop.session.subscribe(
        lambda e: two_chunks.set() if e.type == "assistant/chunk" and e.seq >= 4 else None
    )
    task = asyncio.create_task(loop.run_turn("talk"))
    await asyncio.wait_for(two_chunks.wait(), 5)
    loop.cancel()
    outcome = await asyncio.wait_for(task, 5)
    assert outcome.reason == "aborted"
    check_structure(list(loop.session.events))
    message = next(e for e in loop.session.events if e.type == "assistant/message")
    assert message.data["interrupted"] is True
    assert [b["type"] for b in message.data["message"]["content"]] == ["text"]
    assert not any(e.type == "tool/call" for e in loop.session.events)


async def test_outer_task_cancellation_closes_the_turn_and_propagates() -> None:
    slow = Tool("slow", sleep=30)
    loop = make([ScriptedResponse(tool_calls=[("slow", {})])], slow)
    task = asyncio.create_task(loop.run_turn("x"))
    await asyncio.wait_for(slow.started.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    check_structure(list(loop.session.events))
    assert loop.session.events[-1].data["reason"]["kind"] == "aborted"


@pytest.mark.parametrize(
    ("responses", "tools", "reason", "max_steps"),
    [
        ([ScriptedResponse(text="cut", finish="max-tokens")], [], "max-tokens", 20),
        ([ScriptedResponse(tool_calls=[("todo_write", PLAN)])] * 3, [], "error", 2),
        ([], [], "error", 20),  # the model itself fails
    ],
)
async def test_turn_end_reasons(responses: Any, tools: Any, reason: str, max_steps: int) -> None:
    loop = make(list(responses), *tools, max_steps=max_steps)
    outcome = await loop.run_turn("x")
    assert outcome.reason == reason
    check_structure(list(loop.session.events))
    assert loop.session.events[-1].data["reason"]["kind"] == reason


async def test_failing_tool_becomes_an_error_result_and_the_loop_goes_on() -> None:
    broken = Tool("broken", fail=True)
    loop = make(
        [ScriptedResponse(tool_calls=[("broken", {})]), ScriptedResponse(text="recovered")], broken
    )
    outcome = await loop.run_turn("x")
    assert outcome.reason == "completed" and outcome.text == "recovered"
    result = next(e for e in loop.session.events if e.type == "tool/result")
    block = result.data["message"]["content"][0]
    assert block["isError"] is True and "disk on fire" in block["content"][0]["text"]


async def test_turns_are_numbered_and_cannot_overlap() -> None:
    loop = make([ScriptedResponse(text="a"), ScriptedResponse(text="b")])
    assert (await loop.run_turn("1")).turn == 1
    assert (await loop.run_turn("2")).turn == 2
    loop.session.append("turn/start", {"turn": 3})
    with pytest.raises(RuntimeError, match="already has turn 3 open"):
        await loop.run_turn("3")


# -- concurrent tool calls, model retries, recorded requests (issue #13, part E) ------------------


class Gate:
    """A concurrency-safe tool that finishes only once ``expect`` calls run at the same time
    (so a sequential loop would wait forever); the first call finishes last."""

    concurrency_safe = True

    def __init__(self, name: str, expect: int) -> None:
        self.name = name
        self.description = "waits for its siblings"
        self.parameters: dict[str, Any] = {"type": "object"}
        self.expect = expect
        self.running = 0
        self.all_in = asyncio.Event()
        self.finished: list[int] = []

    async def run(self, args: dict[str, Any], context: ToolContext) -> ToolResult:
        self.running += 1
        if self.running == 2 and hasattr(self, "two_in"):
            self.two_in.set()
        if self.running == self.expect:
            self.all_in.set()
        await self.all_in.wait()
        for _ in range(10 - int(args["n"])):  # the first call finishes last
            await asyncio.sleep(0)
        self.finished.append(int(args["n"]))
        return ToolResult.text(f"gate {args['n']}")


async def test_concurrency_safe_calls_run_together_and_results_keep_call_order() -> None:
    gate = Gate("gate", expect=3)
    slow = Tool("plain")
    calls = [("gate", {"n": 1}), ("gate", {"n": 2}), ("gate", {"n": 3}), ("plain", {})]
    loop = make([ScriptedResponse(tool_calls=calls), ScriptedResponse(text="ok")], gate, slow)  # type: ignore[arg-type]
    outcome = await asyncio.wait_for(loop.run_turn("go"), 10)
    assert outcome.reason == "completed"
    assert gate.finished == [3, 2, 1]  # they ran at once, and finished in reverse
    events = loop.session.events
    step = [e.type for e in events if e.type in ("tool/call", "tool/result")]
    assert step == ["tool/call"] * 3 + ["tool/result"] * 3 + ["tool/call", "tool/result"]
    results = [e for e in events if e.type == "tool/result"]
    texts = [r.data["message"]["content"][0]["content"][0]["text"] for r in results]
    assert texts[:3] == ["gate 1", "gate 2", "gate 3"]  # call order, not finishing order
    assert [r.source_event_seqs for r in results[:3]] == [
        (e.seq,) for e in events if e.type == "tool/call"
    ][:3]
    check_structure(events)


async def test_cancelling_a_concurrent_batch_answers_every_call_in_order() -> None:
    gate = Gate("gate", expect=99)  # never all in: runs until cancelled
    calls = [("gate", {"n": 1}), ("gate", {"n": 2})]
    loop = make([ScriptedResponse(tool_calls=calls)], gate)  # type: ignore[arg-type]
    gate.two_in = asyncio.Event()  # type: ignore[attr-defined]
    running = asyncio.create_task(loop.run_turn("go"))
    await asyncio.wait_for(gate.two_in.wait(), 10)  # type: ignore[attr-defined]
    loop.cancel()
    outcome = await asyncio.wait_for(running, 10)
    assert outcome.reason == "aborted"
    results = [e for e in loop.session.events if e.type == "tool/result"]
    called = [e.data["callId"] for e in loop.session.events if e.type == "tool/call"]
    assert [r.data["message"]["source"]["callId"] for r in results] == called
    assert len(called) == 2
    assert {r.data["error"]["code"] for r in results} == {"TOOL_CANCELLED"}
    check_structure(loop.session.events)


class Flaky:
    """Fails ``failures`` times with a (non-)retryable error, optionally after streaming."""

    provider = "test"
    model = "flaky"

    def __init__(self, failures: int, *, retryable: bool = True, after_text: bool = False):
        self.failures = failures
        self.retryable = retryable
        self.after_text = after_text
        self.calls = 0

    async def stream(self, messages: Any, tools: Any) -> Any:
        from todo_sessions.errors import ModelRequestError
        from todo_sessions.harness.model import Finish, TextDelta

        self.calls += 1
        if self.calls <= self.failures:
            if self.after_text:
                yield TextDelta("par")
            raise ModelRequestError("test", "HTTP 503", status=503, retryable=self.retryable)
        yield TextDelta("fine")
        yield Finish()


def flaky_loop(model: Flaky, retries: int = 2) -> AgentLoop:
    session = Session(SessionHeader(id="flaky", created_at=0), strict=True)
    return AgentLoop(session, model, ToolRegistry(), model_retries=retries, retry_delay=0)


async def test_a_transient_model_error_before_any_delta_is_retried() -> None:
    model = Flaky(2)
    loop = flaky_loop(model)
    outcome = await loop.run_turn("hi")
    assert (outcome.reason, outcome.text, model.calls) == ("completed", "fine", 3)
    assert [e.type for e in loop.session.events].count("assistant/message") == 1


async def test_model_errors_that_are_not_retried() -> None:
    for model, calls in (
        (Flaky(3), 3),
        (Flaky(1, retryable=False), 1),
        (Flaky(1, after_text=True), 1),
    ):
        loop = flaky_loop(model)
        outcome = await loop.run_turn("hi")
        assert outcome.reason == "error" and model.calls == calls
        end = loop.session.events[-1].data["reason"]["error"]
        assert end["code"] == "ModelRequestError"
    # After a delta, the partial message is kept as interrupted.
    message = next(e for e in loop.session.events if e.type == "assistant/message")
    assert message.data["interrupted"] is True
    assert message.data["message"]["content"] == [{"type": "text", "text": "par"}]


async def test_requests_are_recorded_when_they_change_and_derived_at_any_seq() -> None:
    from todo_sessions.harness.requests import derive_request

    registry = ToolRegistry()
    registry.register(TodoWriteTool())
    model = ScriptedModel(
        [
            ScriptedResponse(tool_calls=[("todo_write", PLAN)]),
            ScriptedResponse(text="one"),
            ScriptedResponse(text="two"),
            ScriptedResponse(text="three"),
        ]
    )
    model.system = "be brief"  # type: ignore[attr-defined]
    session = Session(SessionHeader(id="rec", created_at=0), strict=True)
    loop = AgentLoop(session, model, registry, record_requests=True)
    await loop.run_turn("first")
    await loop.run_turn("second")
    headers = [e for e in session.events if e.type == "request/header"]
    assert len(headers) == 1  # three model calls, one configuration
    assert headers[0].data == {  # the reference harness's shape (issue 25, item 5)
        "header": {
            "config": {"provider": "scripted", "model": "scripted-1"},
            "system": "be brief",
            "tools": registry.definitions(),
        },
        "reason": "initial",
    }
    model.system = "be thorough"  # type: ignore[attr-defined]
    await AgentLoop(session, model, registry, record_requests=True).run_turn("third")
    headers = [e for e in session.events if e.type == "request/header"]
    assert [h.data["header"]["system"] for h in headers] == ["be brief", "be thorough"]
    assert [h.data["reason"] for h in headers] == ["initial", "change"]
    check_structure(session.events)

    first_call = next(e.seq for e in session.events if e.type == "assistant/chunk")
    early = derive_request(session.events, upto_seq=first_call)
    assert early.config is not None and early.config.system == "be brief"
    assert [m.role for m in early.messages] == ["user"]
    assert early.messages == model.calls[0]  # exactly what the model was shown
    late = derive_request(session.events)
    assert late.config is not None and late.config.system == "be thorough"
    params = late.to_params("anthropic")
    assert params["system"] == "be thorough" and params["model"] == "scripted-1"
    assert params["tools"][0]["name"] == "todo_write"
    assert derive_request(session.events, upto_seq=0).config is None
