"""The agent loop's automatic compaction (`CompactionPolicy`): a long scripted run whose
history crosses the threshold three times, and summarisations that fail."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from todo_sessions import Session, SessionHeader
from todo_sessions.core.compaction import PLAN_HEADING, is_summary_message
from todo_sessions.core.messages import Message, TextBlock, ToolResultBlock
from todo_sessions.core.structure import check_structure
from todo_sessions.core.surface import derive_messages
from todo_sessions.core.verify import verify_events
from todo_sessions.harness import AgentLoop, CompactionPolicy
from todo_sessions.harness.model import Finish, ModelDelta, TextDelta, ToolCallDelta
from todo_sessions.harness.tools import TodoWriteTool, ToolContext, ToolRegistry, ToolResult

ITEMS = [f"step {n}" for n in range(1, 13)]


def plan_for(turn: int) -> dict[str, Any]:
    """The list the model writes in turn ``turn``: items before it completed, its own in
    progress, the rest pending."""
    status = {True: "completed", False: "pending"}
    todos = [
        {"content": c, "status": "in_progress" if n == turn else status[n < turn]}
        for n, c in enumerate(ITEMS, start=1)
    ]
    return {"todos": todos}


class Reader:
    name = "read"
    description = "reads a file"
    parameters: dict[str, Any] = {"type": "object"}

    async def run(self, args: dict[str, Any], context: ToolContext) -> ToolResult:
        return ToolResult.text(f"contents of {args['path']}: " + "lorem ipsum " * 150)


def _is_request(message: Message) -> bool:
    return message.role == "user" and message.source.kind == "compaction-request"


class PlanningModel:
    """Per turn: a todo_write and a read, then a short answer; a summary when asked."""

    provider = "scripted"
    model = "planner-1"
    context_window = 4000

    def __init__(self, *, fail_summaries: bool = False, empty_summaries: bool = False) -> None:
        self.calls: list[list[Message]] = []
        self.summaries = 0
        self.fail_summaries = fail_summaries
        self.empty_summaries = empty_summaries

    async def stream(
        self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]
    ) -> AsyncIterator[ModelDelta]:
        self.calls.append(list(messages))
        last = messages[-1]
        if _is_request(last):
            self.summaries += 1
            if self.fail_summaries:
                raise RuntimeError("summariser unavailable")
            if not self.empty_summaries:
                yield TextDelta(f"Summary {self.summaries}: the earlier turns read files.")
            yield Finish("stop", {"inputTokens": 900, "outputTokens": 12})
            return
        turn = sum(1 for m in messages if m.role == "user" and m.source.kind == "user")
        if last.source.kind == "user":
            prompt = last.content[0]
            assert isinstance(prompt, TextBlock)
            number = int(prompt.text.split()[-1])
            yield ToolCallDelta(f"t{number}", "todo_write", json.dumps(plan_for(number)))
            yield ToolCallDelta(f"r{number}", "read", json.dumps({"path": f"f{number}.py"}))
            yield Finish("tool-calls")
            return
        yield TextDelta(f"done with turn {turn}")
        yield Finish("stop")


def loop_for(model: PlanningModel, **policy: Any) -> AgentLoop:
    registry = ToolRegistry()
    registry.register(TodoWriteTool())
    registry.register(Reader())
    session = Session(SessionHeader(id="long", created_at=0), strict=True)
    return AgentLoop(session, model, registry, compaction=CompactionPolicy(**policy))


def plan_lines(message: Message) -> list[str]:
    """The todo lines of a summary's plan block."""
    texts = [b.text for b in message.content if isinstance(b, TextBlock)]
    block = next(t for t in texts if t.startswith(PLAN_HEADING))
    return block.splitlines()[2:]  # the heading, then "[todos]"


async def test_a_long_run_compacts_three_times_and_keeps_its_plan() -> None:
    model = PlanningModel()
    loop = loop_for(model, threshold=0.6, keep_turns=1)
    for turn in range(1, 8):
        outcome = await loop.run_turn(f"please do step {turn}")
        assert outcome.reason == "completed"
    session = loop.session
    events = list(session.events)
    starts = [e for e in events if e.type == "compaction/start"]
    ends = [e for e in events if e.type == "compaction/end"]
    assert len(starts) == len(ends) == model.summaries == 3
    assert all(e.data["trigger"] == "auto" and e.data["tokensBefore"] > 0 for e in starts)
    assert all("error" not in e.data and e.data["tokensAfter"] > 0 for e in ends)

    # No lost events: seqs contiguous, structure valid, the whole log folds to the live view.
    assert [e.seq for e in events] == list(range(len(events)))
    check_structure(events)
    assert verify_events(events) == []
    assert derive_messages(events) == list(session.derive_messages())
    assert sum(e.type == "tool/result" for e in events) == 14

    # After each compaction, the next (non-summary) request starts with that summary, whose
    # plan block is the todo list as written so far.
    summaries = [e for e in events if e.type == "user/message" and e.surface_op != "append"]
    assert len(summaries) == 3
    for message_event in summaries:
        request = next(
            call
            for call in model.calls
            if not _is_request(call[-1]) and call[0].id == message_event.data["id"]
        )
        head = request[0]
        assert is_summary_message(head)
        todos_then = [e for e in events if e.type == "todo/write" and e.seq < message_event.seq][
            -1
        ].data["todos"]
        marks = {"completed": "[x]", "in_progress": "[~]", "pending": "[ ]"}
        assert plan_lines(head) == [f"{marks[t['status']]} {t['content']}" for t in todos_then]
        # the kept tail is the current turn: its prompt comes right after the summary
        assert request[1].source.kind == "user"

    # Every summarisation request was built from the derived history, ending in the request.
    for call in model.calls:
        if _is_request(call[-1]):
            assert all(not _is_request(m) for m in call[:-1])
    # The final history is valid for a provider: every tool result has its call before it.
    final = list(session.derive_messages())
    seen: set[str] = set()
    for message in final:
        for block in message.content:
            if isinstance(block, ToolResultBlock):
                assert block.tool_call_id in seen
        seen |= {b.id for b in message.content if getattr(b, "type", "") == "tool-call"}
    assert session.todos is not None and session.todos[6].status == "in_progress"


@pytest.mark.parametrize("how", ["fail", "empty"])
async def test_a_failed_summarisation_leaves_the_history_and_the_turn_goes_on(
    how: str, caplog: pytest.LogCaptureFixture
) -> None:
    model = PlanningModel(fail_summaries=how == "fail", empty_summaries=how == "empty")
    loop = loop_for(model, threshold=0.6)
    with caplog.at_level(logging.WARNING, "todo_sessions.harness"):
        for turn in range(1, 6):
            assert (await loop.run_turn(f"please do step {turn}")).reason == "completed"
    events = list(loop.session.events)
    assert model.summaries >= 1
    ends = [e for e in events if e.type == "compaction/end"]
    assert len(ends) == model.summaries and all(e.data["error"] for e in ends)
    assert not any(e.surface_op not in (None, "append") for e in events)
    assert "compaction failed" in caplog.text
    # the history is everything, as if no compaction had been tried
    assert len(loop.session.derive_messages()) == 5 * 5
    assert verify_events(events) == []


def test_a_policy_needs_a_context_window() -> None:
    class NoWindow(PlanningModel):
        context_window = None  # type: ignore[assignment]

    with pytest.raises(ValueError, match="context window"):
        loop_for(NoWindow())
    with pytest.raises(ValueError):
        CompactionPolicy(threshold=1.5)
    with pytest.raises(ValueError):
        CompactionPolicy(keep_turns=0)
