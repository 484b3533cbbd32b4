"""The deterministic model and tool behind ``todo-sessions acp``.

Each non-empty line of the prompt becomes a todo. The model plans them all with
``todo_write``, then works through them one per step (a ``todo_write`` moving the next todo to
``in_progress`` plus a call of the ``work`` tool), marks everything completed, and answers.
It decides from the message history alone, so a resumed session carries on where it stopped.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

from .._service import SessionService
from ..core.messages import AssistantMessage, Message, TextBlock, ToolCallBlock, UserMessage
from ..harness.model import Finish, ModelDelta, TextDelta, ToolCallDelta
from ..harness.subagent import SubagentTool
from ..harness.tools.base import ToolContext, ToolResult
from ..harness.tools.registry import ToolRegistry
from ..harness.tools.todo_write import TodoWriteTool

__all__ = ["SYSTEM_PROMPT", "PlanningModel", "WorkTool", "builtin_tools", "todo_tools"]

SYSTEM_PROMPT = """\
You are a coding agent working for a user inside their editor. Plan before you act: for any \
request with more than one step, call the todo_write tool with the complete todo list (each \
item's content and status: pending, in_progress or completed; exactly one in_progress while \
you work), and call it again whenever an item's status changes. Keep answers short and \
concrete; say plainly when you cannot do something with the tools you have."""
"""The system prompt of ``todo-sessions acp --model`` (``--system`` replaces it)."""


class WorkTool:
    """``work(task)``: pretends to do one task and says so."""

    name = "work"
    description = "Do one task of the plan and report the outcome."
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {"task": {"type": "string"}},
        "required": ["task"],
        "additionalProperties": False,
    }

    async def run(self, args: dict[str, Any], context: ToolContext) -> ToolResult:
        return ToolResult.text(f"done: {args['task']}")

    def present_call(self, args: Any) -> dict[str, Any]:
        task = args.get("task", "") if isinstance(args, dict) else ""
        return {"title": f"Work on: {task}", "kind": "execute", "raw_input": args}


def todo_tools(service: SessionService | None = None) -> ToolRegistry:
    """The tools a real model gets from ``todo-sessions acp --model``: ``todo_write`` and,
    given the service, ``subagent`` (its children run on that service, with the same tools,
    recording their requests as the bridge's loops do)."""
    registry = ToolRegistry()
    registry.register(TodoWriteTool())
    if service is not None:
        registry.register(SubagentTool(service, record_requests=True))
    return registry


def builtin_tools() -> ToolRegistry:
    registry = ToolRegistry()
    registry.register(TodoWriteTool())
    registry.register(WorkTool())
    return registry


def _tasks(prompt: UserMessage) -> list[str]:
    seen: list[str] = []
    for block in prompt.content:
        if not isinstance(block, TextBlock):
            continue
        for line in block.text.splitlines():
            task = line.strip().lstrip("-*").strip()
            if task and task not in seen:
                seen.append(task)
    return seen


def _plan(tasks: list[str], done: int) -> str:
    todos = [
        {
            "content": task,
            "status": "completed" if i < done else "in_progress" if i == done else "pending",
        }
        for i, task in enumerate(tasks)
    ]
    return json.dumps({"todos": todos})


class PlanningModel:
    """Works through the lines of the latest prompt as a todo list (see module docstring)."""

    provider = "todo-sessions"
    model = "builtin-planner"

    async def stream(
        self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]
    ) -> AsyncIterator[ModelDelta]:
        start = max(
            (i for i, m in enumerate(messages) if m.role == "user" and m.source.kind == "user"),
            default=None,
        )
        if start is None:
            yield TextDelta("Nothing to do.")
            yield Finish()
            return
        prompt = messages[start]
        assert isinstance(prompt, UserMessage)
        tasks = _tasks(prompt)
        calls = [
            block
            for m in messages[start + 1 :]
            if isinstance(m, AssistantMessage)
            for block in m.content
            if isinstance(block, ToolCallBlock)
        ]
        worked = sum(1 for c in calls if c.name == "work")
        finished = any(
            c.name == "todo_write"
            and '"pending"' not in c.arguments
            and '"in_progress"' not in c.arguments
            for c in calls
        )
        turn_calls = len(calls)
        if not tasks:
            yield TextDelta("Send one task per line and I will plan and do them.")
            yield Finish()
        elif worked < len(tasks):
            task = tasks[worked]
            yield TextDelta(f"Working on {worked + 1}/{len(tasks)}: {task}")
            yield ToolCallDelta(f"m{start}-plan-{turn_calls}", "todo_write", _plan(tasks, worked))
            yield ToolCallDelta(f"m{start}-work-{turn_calls}", "work", json.dumps({"task": task}))
            yield Finish("tool-calls")
        elif not finished:
            yield TextDelta("All tasks are done; closing the plan.")
            yield ToolCallDelta(
                f"m{start}-plan-{turn_calls}", "todo_write", _plan(tasks, len(tasks))
            )
            yield Finish("tool-calls")
        else:
            yield TextDelta(f"Done: {len(tasks)} task(s) completed.")
            yield Finish()
