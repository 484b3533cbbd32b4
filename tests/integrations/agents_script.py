"""A scripted Agents SDK model (no network) and the three-turn conversation of the tests."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from agents import Agent, function_tool, set_tracing_disabled
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from todo_sessions.integrations.openai_agents import todo_write_tool

set_tracing_disabled(True)  # no trace export (it would need a key and the network)


def text(reply: str, n: int) -> ResponseOutputMessage:
    part = ResponseOutputText(text=reply, annotations=[], type="output_text")
    return ResponseOutputMessage(
        id=f"msg_{n}", content=[part], role="assistant", status="completed", type="message"
    )


def call(name: str, args: dict[str, Any], n: int) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(
        id=f"fc_{n}",
        call_id=f"call_{n}",
        name=name,
        arguments=json.dumps(args),
        type="function_call",
        status="completed",
    )


PLAN = [
    {"content": "Read the failing test", "status": "completed"},
    {"content": "Fix the parser", "status": "in_progress"},
]
DONE = [
    {"content": "Read the failing test", "status": "completed"},
    {"content": "Fix the parser", "status": "completed"},
]

SCRIPT: list[list[Any]] = [
    [call("todo_write", {"todos": PLAN}, 1)],  # turn 1: plan
    [text("Planned.", 2)],
    [call("shell", {"command": "pytest -q"}, 3)],  # turn 2: run a tool, then update the plan
    [call("todo_write", {"todos": DONE}, 4)],
    [text("Tests pass.", 5)],
    [text("All done: the parser is fixed.", 6)],  # turn 3 (the resumed process)
]
PROMPTS = ["Fix the parser bug", "Run the tests", "Summarise"]


class ScriptedModel(Model):
    """Answers from a list of responses, one per call; keeps each call's input."""

    def __init__(self, responses: list[list[Any]]) -> None:
        self.responses = list(responses)
        self.inputs: list[Any] = []

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kw: Any):
        self.inputs.append(json.loads(json.dumps(input, default=str)))
        return ModelResponse(output=self.responses.pop(0), usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kw: Any) -> AsyncIterator[Any]:
        raise NotImplementedError


@function_tool
def shell(command: str) -> str:
    """Run a shell command (scripted: always passes)."""
    return f"$ {command}\n3 passed"


def agent(model: ScriptedModel) -> Agent:
    return Agent(name="coder", model=model, tools=[shell, todo_write_tool()])
