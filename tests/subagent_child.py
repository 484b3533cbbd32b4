"""A child process whose agent delegates to a subagent that hangs in a tool, to be killed.

``python subagent_child.py URL SESSION`` prints ``READY in-child`` (flushed) once the
subagent's ``tool/call`` of the hanging tool is stored (the parent's ``tool/call`` of the
``subagent`` tool before it), then blocks until killed.
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
from todo_sessions.harness.tools import (
    TodoWriteTool,
    ToolContext,
    ToolRegistry,
    ToolResult,
)

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


async def main(url: str, session_id: str) -> None:
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
    child_model = ScriptedModel(
        [
            ScriptedResponse(
                text="Surveying.", tool_calls=[("todo_write", CHILD_PLAN), ("survey", {})]
            )
        ]
    )
    async with SessionService(SessionStore(url), strict=True) as service:
        tools = ToolRegistry()
        tools.register(TodoWriteTool())
        tools.register(SubagentTool(service, model=child_model, tools=child_tools))
        session = await service.new(session_id, cwd="/srv")
        loop = AgentLoop(
            session, parent_model, tools, checkpoint=service.checkpoint_for(session_id)
        )
        await loop.run_turn("survey the tests for me")


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:3]))
