"""``todo-sessions acp --model``: a real model (served by a local fake HTTP server) runs the
loop with todo_write; tools that need permission ask through ``session/request_permission``."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import acp
import pytest
from test_model_adapters import FakeServer, Reply
from test_providers_stream import CHAT_TEXT, _chunk

from todo_sessions import SessionService, SessionStore
from todo_sessions.acp.agent import TodoSessionsAgent
from todo_sessions.acp.builtin import SYSTEM_PROMPT
from todo_sessions.acp.mapping import update_to_wire
from todo_sessions.harness import ScriptedModel, ScriptedResponse, ToolRegistry
from todo_sessions.harness.requests import derive_request, derive_stored_request
from todo_sessions.harness.tools.base import ToolContext, ToolResult


class Recorder:
    def __init__(self) -> None:
        self.wire: list[dict[str, Any]] = []

    def observe(self, event: Any) -> None:
        if event.direction.value == "incoming":
            self.wire.append(event.message)

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        return None

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover
        raise acp.RequestError.method_not_found("session/request_permission")


@pytest.mark.slow
async def test_acp_with_a_real_model_over_stdio(tmp_path: Path) -> None:
    plan = json.dumps({"todos": [{"content": "write the tests", "status": "in_progress"}]})
    call = {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": "todo_write", "arguments": plan},
    }
    first = [
        _chunk({"role": "assistant", "content": "Planning."}),
        _chunk({"tool_calls": [call]}),
        _chunk({}, "tool_calls"),
    ]
    async with FakeServer(Reply(events=first), Reply(events=CHAT_TEXT)) as server:
        recorder = Recorder()
        env = {
            "TODO_SESSIONS_URL": f"sqlite:///{tmp_path}/acp.db",
            "PYTHONPATH": os.pathsep.join(sys.path),
            "TEST_MODEL_KEY": "sk-test",
        }
        args = ["-m", "todo_sessions", "acp", "--model", "openai:test-model"]
        args += ["--base-url", f"{server.url}/v1", "--api-key-env", "TEST_MODEL_KEY"]
        async with acp.spawn_agent_process(
            recorder, sys.executable, *args, env=env, observers=[recorder.observe]
        ) as (conn, _proc):
            await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
            new = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            response = await conn.prompt(session_id=new.session_id, prompt=[acp.text_block("go")])
    assert response.stop_reason == "end_turn"
    updates = [m["params"]["update"] for m in recorder.wire if m.get("method") == "session/update"]
    plans = [u for u in updates if u["sessionUpdate"] == "plan"]
    assert plans[-1]["entries"][0]["content"] == "write the tests"
    said = "".join(
        u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"
    )
    assert said == "Planning.Hello, world"
    request = server.requests[0]
    assert request["headers"]["authorization"] == "Bearer sk-test"
    body = request["json"]
    assert body["model"] == "test-model" and body["messages"][0]["role"] == "system"
    assert [t["function"]["name"] for t in body["tools"]] == ["todo_write", "subagent"]
    second = server.requests[1]["json"]["messages"]
    assert second[-1] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": second[-1]["content"],
    }
    # The request configuration is in the log, and the requests can be derived from it.
    async with SessionStore(f"sqlite:///{tmp_path}/acp.db") as store:
        events = (await store.read(new.session_id)).events
        derived = await derive_stored_request(store, new.session_id)
    headers = [e for e in events if e.type == "request/header"]
    assert len(headers) == 1  # in the reference harness's shape
    assert headers[0].data["header"]["config"]["model"] == "test-model"
    assert headers[0].data["header"]["system"] == SYSTEM_PROMPT
    chunks = [e.seq for e in events if e.type == "assistant/chunk"]
    for request, before in zip(server.requests, (chunks[0], chunks[-1]), strict=True):
        sent = derive_request(events, upto_seq=before - 1).to_params("openai-chat")
        assert sent["messages"] == request["json"]["messages"]
        assert sent["tools"] == request["json"]["tools"]
    assert derived.config is not None and derived.config.model == "test-model"


# -- permission ----------------------------------------------------------------------------------


class Danger:
    name = "rm"
    description = "Delete a file."
    parameters: dict[str, Any] = {"type": "object", "properties": {"path": {"type": "string"}}}
    requires_permission = True

    def __init__(self) -> None:
        self.ran: list[str] = []

    async def run(self, args: dict[str, Any], context: ToolContext) -> ToolResult:
        self.ran.append(args["path"])
        return ToolResult.text(f"deleted {args['path']}")


class PermissionConn:
    def __init__(self, *answers: str | None) -> None:
        self.answers = list(answers)
        self.log: list[tuple[str, Any]] = []

    async def session_update(self, session_id: str, update: Any) -> None:
        self.log.append(("update", update_to_wire(update)))

    async def request_permission(self, session_id: str, tool_call: Any, options: Any) -> Any:
        from acp.schema import AllowedOutcome, DeniedOutcome, RequestPermissionResponse

        self.log.append(("ask", tool_call.tool_call_id))
        answer = self.answers.pop(0)
        if answer is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=answer)
        )


class Text:
    type = "text"

    def __init__(self, text: str) -> None:
        self.text = text


async def test_tools_that_need_permission_ask_the_client(tmp_path: Path) -> None:
    danger = Danger()

    def tools() -> ToolRegistry:
        registry = ToolRegistry()
        registry.register(danger)
        return registry

    responses = [
        ScriptedResponse(tool_calls=[("rm", {"path": "a"})]),
        ScriptedResponse(text="ok"),
        ScriptedResponse(tool_calls=[("rm", {"path": "b"})]),
        ScriptedResponse(text="ok"),
        ScriptedResponse(tool_calls=[("rm", {"path": "c"})]),
        ScriptedResponse(text="ok"),
        ScriptedResponse(tool_calls=[("rm", {"path": "d"})]),
        ScriptedResponse(text="ok"),
    ]
    model = ScriptedModel(responses)
    service = SessionService(SessionStore(f"sqlite:///{tmp_path}/p.db"), strict=True)
    agent = TodoSessionsAgent(service, model_factory=lambda: model, tools_factory=tools)
    conn = PermissionConn("reject-once", None, "allow-always")
    agent.on_connect(conn)
    sid = (await agent.new_session(cwd=str(tmp_path))).session_id
    for _ in range(4):
        assert (await agent.prompt(session_id=sid, prompt=[Text("go")])).stop_reason == "end_turn"
    assert danger.ran == ["c", "d"]  # rejected, cancelled, allowed always, then not asked
    asks = [i for i, (kind, _) in enumerate(conn.log) if kind == "ask"]
    assert len(asks) == 3
    for index in asks:  # the client saw the tool_call before it was asked about it
        call_id = conn.log[index][1]
        shown = [
            u for kind, u in conn.log[:index] if kind == "update" and u.get("toolCallId") == call_id
        ]
        assert shown and shown[0]["sessionUpdate"] == "tool_call"
    await service.flush(sid)
    log = (await service.store.read(sid)).events
    results = [e.data for e in log if e.type == "tool/result"]
    texts = [r["message"]["content"][0]["content"][0]["text"] for r in results]
    assert texts[0] == "not run: the user did not allow this call of rm"
    assert texts[1] == "not run: the permission request was cancelled"
    assert texts[2:] == ["deleted c", "deleted d"]
    await service.aclose()
