"""A child process that runs the agent loop into a file database and waits to be killed.

``python crash_child.py URL SESSION SCENARIO`` prints ``READY <marker>`` (flushed) when it has
reached the point the parent kills it at, then blocks:

- ``mid-stream``: the model has streamed a few chunks of its second response;
- ``in-tool``: the tool/call of a started tool was flushed and its body is running, while the
  same assistant message asked for a second tool that never started.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from todo_sessions import SessionService, SessionStore
from todo_sessions.harness.loop import AgentLoop
from todo_sessions.harness.model import ModelDelta, ScriptedModel, ScriptedResponse
from todo_sessions.harness.tools import TodoWriteTool, ToolContext, ToolRegistry, ToolResult

PLAN = {
    "todos": [
        {"content": "deploy", "status": "in_progress"},
        {"content": "verify", "status": "pending"},
    ]
}


def ready(marker: str) -> None:
    print(f"READY {marker}", flush=True)


class Hang:
    """A tool whose body announces itself and never returns."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.description = name
        self.parameters: dict[str, Any] = {"type": "object"}

    async def run(self, args: dict[str, Any], context: ToolContext) -> ToolResult:
        ready("in-tool")
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


class Announcing(ScriptedModel):
    """Stops after three deltas of its second response when ``hang_mid_stream``."""

    hang_mid_stream = False

    async def stream(
        self, messages: Sequence[Any], tools: Sequence[Any]
    ) -> AsyncIterator[ModelDelta]:
        count = 0
        async for delta in super().stream(messages, tools):
            yield delta
            count += 1
            if self.hang_mid_stream and len(self.calls) == 2 and count == 3:
                ready("mid-stream")
                await asyncio.Event().wait()


async def main(url: str, session_id: str, scenario: str) -> None:
    tools = ToolRegistry()
    tools.register(TodoWriteTool())
    tools.register(Hang("deploy"))
    tools.register(Hang("notify"))
    first = ScriptedResponse(text="Planning.", tool_calls=[("todo_write", PLAN)])
    if scenario == "mid-stream":
        second = ScriptedResponse(
            text="one two three four five six seven", tool_calls=[("deploy", {})]
        )
    else:
        second = ScriptedResponse(text="Deploying.", tool_calls=[("deploy", {}), ("notify", {})])
    async with SessionService(SessionStore(url), strict=True) as service:
        session = await service.new(session_id, cwd="/srv")
        model = Announcing([first, second])
        model.hang_mid_stream = scenario == "mid-stream"
        loop = AgentLoop(
            session,
            model,
            tools,
            checkpoint=service.checkpoint_for(session_id),
        )
        await loop.run_turn("deploy the app")


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
