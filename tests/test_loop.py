"""The agent loop with a scripted model: structure, surface, cancellation.

See docs/design.md, "Agent loop and tools".
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from factories import call_ids

from todo_sessions import SessionHeader
from todo_sessions.agent.loop import AgentLoop
from todo_sessions.agent.model import ScriptedModel, ScriptedResponse
from todo_sessions.core.structure import check_structure
from todo_sessions.core.surface import derive_messages
from todo_sessions.session import Session
from todo_sessions.tools import TodoWriteTool, ToolContext, ToolRegistry, ToolResult

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
