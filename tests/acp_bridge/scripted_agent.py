"""A scripted ACP agent for the feature tests: deterministic models, a ``subagent`` tool, and
automatic compaction, all running for real through `TodoSessionsAgent` and `AgentLoop`.

``python scripted_agent.py DB_URL`` serves it over stdio (the TypeScript and Python SDK
clients of test_acp_features_stdio.py spawn it); `make_agent` builds it in process.

The parent model (`Director`) reads the latest prompt:

- ``plan``: writes a todo list, then empties it, then answers;
- ``delegate TASK`` / ``fail TASK``: plans, calls ``subagent`` (``fail``: the child's model
  fails), then empties its list and answers;
- ``slow``: streams slowly (something to cancel);
- anything else: answers at once.

Every answer starts with ``[MODEL]``, the name of the model that wrote it (``alpha`` or
``beta``, the two offered models). A compaction request is answered with a summary, or with
nothing (a failed compaction) when the newest prompt it summarises contains ``nosummary``.

The ``subagent`` tool runs a child `AgentLoop` on a child session (``origin`` ``subagent``,
``parent_session`` and ``delegation_depth`` set) whose id is derived from the call; the
parent's ``tool/call`` names it as ``subagentSessionId`` (the tool's ``call_fields``, which
the harness adds to the call; a harness that does not yet is wrapped here to). The child
writes a todo list of its own, completes it and answers.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
from collections.abc import AsyncIterator, Sequence
from typing import Any

from todo_sessions import SessionService, SessionStore
from todo_sessions.acp.agent import TodoSessionsAgent, serve
from todo_sessions.acp.config_options import ModelChoice
from todo_sessions.core.messages import AssistantMessage, Message, TextBlock, ToolCallBlock
from todo_sessions.harness.compaction import CompactionPolicy
from todo_sessions.harness.loop import AgentLoop
from todo_sessions.harness.model import Finish, ModelDelta, TextDelta, ToolCallDelta
from todo_sessions.harness.tool_runs import ToolRunner
from todo_sessions.harness.tools.base import ToolContext, ToolResult
from todo_sessions.harness.tools.registry import ToolRegistry
from todo_sessions.harness.tools.todo_write import TodoWriteTool

KEY_ENV = "TODO_SESSIONS_SCRIPTED_KEY"
"""The API key variable the scripted models "need" (for ``authMethods``)."""


def child_id_of(parent_id: str, call_id: str) -> str:
    """The child session of a ``subagent`` call, derived from the call."""
    return "sub-" + hashlib.sha256(f"{parent_id}:{call_id}".encode()).hexdigest()[:24]


def _with_subagent_id(original: Any) -> Any:
    def _call(self: ToolRunner, turn: int, step: int, call: ToolCallDelta) -> int:
        if call.name != "subagent":
            return original(self, turn, step, call)
        data = {
            "turn": turn,
            "step": step,
            "callId": call.id,
            "name": call.name,
            "arguments": call.arguments,
            "subagentSessionId": child_id_of(self.session.id, call.id),
        }
        return self.session.append("tool/call", data).seq

    return _call


_HARNESS_ASKS = "call_fields" in ToolRunner._call.__code__.co_consts
"""Whether the harness adds a tool's ``call_fields`` to its ``tool/call`` itself."""

if not _HARNESS_ASKS and not getattr(ToolRunner._call, "_scripted", False):
    ToolRunner._call = _with_subagent_id(ToolRunner._call)  # type: ignore[method-assign]
    ToolRunner._call._scripted = True  # type: ignore[attr-defined]


def _text(message: Message) -> str:
    return "".join(b.text for b in message.content if isinstance(b, TextBlock))


def _todos(*items: tuple[str, str]) -> str:
    return json.dumps({"todos": [{"content": c, "status": s} for c, s in items]})


class Director:
    """The parent model (see the module docstring)."""

    provider = "scripted"

    def __init__(self, name: str) -> None:
        self.model = name

    async def stream(
        self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]
    ) -> AsyncIterator[ModelDelta]:
        if messages and messages[-1].source.kind == "compaction-request":
            prompts = [_text(m) for m in messages if m.role == "user" and m.source.kind == "user"]
            if not (prompts and "nosummary" in prompts[-1]):
                yield TextDelta(f"summary: {len(prompts)} prompt(s) so far")
            yield Finish()
            return
        start = max(i for i, m in enumerate(messages) if m.source.kind == "user")
        prompt = _text(messages[start]).strip()
        calls = [
            b.name
            for m in messages[start + 1 :]
            if isinstance(m, AssistantMessage)
            for b in m.content
            if isinstance(b, ToolCallBlock)
        ]
        deltas = self._step(prompt, len(calls), f"t{start}-")
        for delta in deltas:
            yield delta
        if prompt == "slow":
            for word in ["slowly", " and", " slowly"]:
                await asyncio.sleep(0.5)
                yield TextDelta(word)
        tools_called = any(isinstance(d, ToolCallDelta) for d in deltas)
        yield Finish("tool-calls") if tools_called else Finish()

    def _step(self, prompt: str, done: int, at: str) -> list[ModelDelta]:
        """This step's deltas, ``done`` calls into the turn (call ids start with ``at``)."""
        word, _, task = prompt.partition(" ")
        if word == "plan" and done < 2:
            todos = _todos(("outline", "in_progress")) if done == 0 else _todos()
            return [ToolCallDelta(f"{at}c{done}", "todo_write", todos)]
        if word in ("delegate", "fail") and done == 0:
            args = {"task": f"{word} {task}", "title": f"child: {task}"}
            return [
                ToolCallDelta(f"{at}c0", "todo_write", _todos((f"wait for {task}", "in_progress"))),
                ToolCallDelta(f"{at}c1", "subagent", json.dumps(args)),
            ]
        if word in ("delegate", "fail") and done == 2:
            return [ToolCallDelta(f"{at}c2", "todo_write", _todos())]
        return [TextDelta(f"[{self.model}] done: {prompt}")]


class Child:
    """A child's model: plans its task, completes it, answers (``fail``: raises)."""

    provider = "scripted"
    model = "child"

    async def stream(
        self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]
    ) -> AsyncIterator[ModelDelta]:
        task = _text(messages[0]).strip()
        if task.startswith("fail"):
            raise RuntimeError(f"the child could not {task}")
        steps = sum(isinstance(m, AssistantMessage) for m in messages)
        if steps == 0:
            yield ToolCallDelta("k1", "todo_write", _todos((task, "in_progress")))
            yield Finish("tool-calls")
        elif steps == 1:
            yield ToolCallDelta("k2", "todo_write", _todos((task, "completed")))
            yield Finish("tool-calls")
        else:
            yield TextDelta(f"child finished: {task}")
            yield Finish()


class SubagentTool:
    """``subagent(task, title?)``: runs a child loop on a child session (test double of the
    harness's tool)."""

    name = "subagent"
    description = "Delegate a task to a subagent."
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {"task": {"type": "string"}, "title": {"type": "string"}},
        "required": ["task"],
    }

    def __init__(self, service: SessionService) -> None:
        self.service = service

    def call_fields(self, session: Any, call_id: str, arguments: str) -> dict[str, Any]:
        """The keys the harness adds to this tool's ``tool/call``."""
        return {"subagentSessionId": child_id_of(session.id, call_id)}

    async def run(self, args: dict[str, Any], context: ToolContext) -> ToolResult:
        parent = context.session
        assert parent is not None
        child_id = child_id_of(parent.id, context.call_id)
        child = await self.service.new(
            child_id,
            cwd=parent.header.cwd,
            title=args.get("title"),
            origin="subagent",
            delegation_depth=parent.header.delegation_depth + 1,
            parent=parent.id,
        )
        registry = ToolRegistry()
        registry.register(TodoWriteTool())
        loop = AgentLoop(child, Child(), registry, checkpoint=self.service.checkpoint_for(child_id))
        try:
            outcome = await loop.run_turn([{"type": "text", "text": args["task"]}])
        finally:
            await self.service.close(child_id)
        if outcome.reason != "completed":
            return ToolResult.error(f"the subagent stopped: {outcome.reason}")
        return ToolResult.text(outcome.text)


def make_agent(service: SessionService, **kwargs: Any) -> TodoSessionsAgent:
    def tools() -> ToolRegistry:
        registry = ToolRegistry()
        registry.register(TodoWriteTool())
        registry.register(SubagentTool(service))
        return registry

    models = [
        ModelChoice("alpha", lambda: Director("alpha"), "Alpha", key_env=KEY_ENV),
        ModelChoice("beta", lambda: Director("beta"), "Beta", key_env=KEY_ENV),
    ]
    kwargs.setdefault("compaction", CompactionPolicy(threshold=0.5, context_window=64))
    return TodoSessionsAgent(service, models=models, tools_factory=tools, **kwargs)


async def _main(url: str) -> None:
    service = SessionService(SessionStore(url))
    await serve(service, make_agent(service))


if __name__ == "__main__":
    asyncio.run(_main(sys.argv[1]))
