"""A child process whose agent delegates to a subagent, to be killed.

``python subagent_child.py URL SESSION SCENARIO`` prints ``READY <SCENARIO>`` (flushed), then
blocks until killed:

- ``in-child``: once the subagent's ``tool/call`` of a hanging tool is stored (the parent's
  ``tool/call`` of the ``subagent`` tool before it);
- ``after-child``: once the subagent finished (its session stored and closed) and the parent
  is about to store the call's result (it never does).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from todo_sessions import SessionService, SessionStore
from todo_sessions.harness.loop import AgentLoop
from todo_sessions.harness.model import ScriptedModel, ScriptedResponse
from todo_sessions.harness.subagent import SubagentTool
from todo_sessions.harness.tools import TodoWriteTool, ToolContext, ToolRegistry, ToolResult

PARENT_PLAN = {"todos": [{"content": "delegate the survey", "status": "in_progress"}]}
CHILD_PLAN = {
    "todos": [
        {"content": "read the tests", "status": "in_progress"},
        {"content": "report", "status": "pending"},
    ]
}


class Hang:
    """A tool whose body announces itself and never returns."""

    name = "survey"
    description = "survey"
    parameters: dict[str, Any] = {"type": "object"}

    async def run(self, args: dict[str, Any], context: ToolContext) -> ToolResult:
        print("READY in-child", flush=True)
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


def child_tools() -> ToolRegistry:
    registry = ToolRegistry()
    registry.register(TodoWriteTool())
    registry.register(Hang())
    return registry


def hang_before_storing_the_result(service: SessionService, session_id: str) -> Any:
    """The parent's checkpoint: at the model call after the subagent answered, hang instead
    of flushing the parent's ``tool/result``."""
    flush = service.checkpoint_for(session_id)

    async def checkpoint(name: str) -> None:
        answered = any(e.type == "tool/result" for e in service.get(session_id).events)
        if name == "before-model" and answered:
            print("READY after-child", flush=True)
            await asyncio.Event().wait()
        await flush(name)

    return checkpoint


async def main(url: str, session_id: str, scenario: str) -> None:
    parent_model = ScriptedModel(
        [
            ScriptedResponse(
                text="Delegating.",
                tool_calls=[
                    ("todo_write", PARENT_PLAN),
                    ("subagent", {"task": "survey the tests", "title": "Survey"}),
                ],
            )
        ]
    )
    survey = [] if scenario == "after-child" else [("survey", {})]
    child_model = ScriptedModel(
        [
            ScriptedResponse(text="Surveying.", tool_calls=[("todo_write", CHILD_PLAN), *survey]),
            ScriptedResponse(text="3 tests."),
        ]
    )
    async with SessionService(SessionStore(url), strict=True) as service:
        tools = ToolRegistry()
        tools.register(TodoWriteTool())
        tools.register(SubagentTool(service, model=child_model, tools=child_tools))
        session = await service.new(session_id, cwd="/srv")
        checkpoint = service.checkpoint_for(session_id)
        if scenario == "after-child":
            checkpoint = hang_before_storing_the_result(service, session_id)
        loop = AgentLoop(session, parent_model, tools, checkpoint=checkpoint)
        await loop.run_turn("survey the tests for me")


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
