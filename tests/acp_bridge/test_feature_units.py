"""The pure parts of the newer ACP updates, and ``todo-sessions acp``'s options for them."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import acp
import pytest
from click.testing import CliRunner

from todo_sessions.acp.capabilities import ClientFeatures
from todo_sessions.acp.compaction_updates import compaction_updates
from todo_sessions.acp.plans import plan_operation
from todo_sessions.acp.subagents import SubagentCalls, child_idle
from todo_sessions.cli import main
from todo_sessions.cli.acp import key_env_of
from todo_sessions.core.envelope import SessionEvent


def event(kind: str, seq: int, data: dict[str, Any]) -> SessionEvent:
    return SessionEvent(kind, seq, 0, data)


def test_client_features_from_json_or_the_sdk_model() -> None:
    assert ClientFeatures.of(None) == ClientFeatures()
    assert ClientFeatures.of({}) == ClientFeatures()
    everything = {"plan": {}, "subagents": {}, "session": {"compaction": {}}}
    assert ClientFeatures.of(everything) == ClientFeatures(True, True, True)
    assert ClientFeatures.of({"plan": None, "session": {"compaction": None}}) == ClientFeatures()
    model = acp.schema.ClientCapabilities(plan=acp.schema.PlanCapabilities())
    assert ClientFeatures.of(model) == ClientFeatures(plans=True)


def test_a_childs_idle_state_from_its_last_turn() -> None:
    def end(reason: dict[str, Any]) -> SessionEvent:
        return event("turn/end", 9, {"turn": 1, "reason": reason})

    assert child_idle(None) is None
    assert child_idle(event("turn/start", 3, {"turn": 1})) is None  # still open
    assert child_idle(end({"kind": "completed"})) == {"state": "idle", "stopReason": "end_turn"}
    for kind in ("aborted", "interrupted"):
        assert child_idle(end({"kind": kind}))["stopReason"] == "cancelled"  # type: ignore[index]
    failed = child_idle(end({"kind": "error", "error": {"code": "X", "message": "boom"}}))
    assert failed == {
        "state": "idle",
        "stopReason": "error",
        "error": {"code": -32603, "message": "boom"},
    }
    maxed = child_idle(end({"kind": "max-tokens"}))  # a failed child for `children` too
    assert maxed is not None and maxed["stopReason"] == "error"


def test_plan_operations() -> None:
    entries = [{"content": "a", "status": "pending", "priority": "medium"}]
    assert plan_operation({"sessionUpdate": "plan", "entries": entries}) == {
        "sessionUpdate": "plan_update",
        "plan": {"type": "items", "planId": "main", "entries": entries},
    }
    assert plan_operation({"sessionUpdate": "plan", "entries": []}) == {
        "sessionUpdate": "plan_removed",
        "planId": "main",
    }


def test_compaction_updates_of_each_record() -> None:
    start = event("compaction/start", 3, {"compactionId": "k", "turn": 2, "trigger": "auto"})
    assert compaction_updates(start) == [
        {"sessionUpdate": "compaction_update", "compactionId": "k", "status": "in_progress"}
    ]
    summary = {
        "compactionId": "k",
        "summary": [{"type": "text", "text": "so far"}, {"type": "text", "text": ""}],
    }
    assert compaction_updates(event("compaction/summary", 4, summary)) == [
        {
            "sessionUpdate": "compaction_summary_chunk",
            "compactionId": "k",
            "content": {"type": "text", "text": "so far"},
        }
    ]
    end = event("compaction/end", 6, {"compactionId": "k", "turn": 2})
    assert compaction_updates(end)[0]["status"] == "completed"
    failed = event("compaction/end", 6, {"compactionId": "k", "turn": 2, "error": "no summary"})
    assert compaction_updates(failed) == [
        {
            "sessionUpdate": "compaction_update",
            "compactionId": "k",
            "status": "failed",
            "error": "no summary",
        }
    ]
    prune = {"shadowedRange": {"start": 1, "end": 1}, "shadowedSeqs": [1]}
    assert compaction_updates(event("compaction/prune", 7, prune)) == []


def _result(call_id: str, error: dict[str, str] | None) -> SessionEvent:
    data: dict[str, Any] = {
        "turn": 1,
        "step": 1,
        "message": {
            "id": "m",
            "role": "user",
            "source": {"kind": "tool", "callId": call_id},
            "content": [
                {
                    "type": "tool-result",
                    "toolCallId": call_id,
                    "content": [{"type": "text", "text": "it broke"}],
                    "isError": error is not None,
                }
            ],
        },
    }
    if error is not None:
        data["error"] = error
    return event("tool/result", 9, data)


@pytest.mark.parametrize(
    ("error", "failed", "state"),
    [
        (None, False, {"state": "idle", "stopReason": "end_turn"}),
        ({"code": "TOOL_CANCELLED"}, True, {"state": "idle", "stopReason": "cancelled"}),
        (
            {"code": "TOOL_ERROR"},
            True,
            {
                "state": "idle",
                "stopReason": "error",
                "error": {"code": -32603, "message": "it broke"},
            },
        ),
    ],
)
def test_subagent_announcements(error: Any, failed: bool, state: dict[str, Any]) -> None:
    calls = SubagentCalls()
    plain = event("tool/call", 5, {"turn": 1, "step": 1, "callId": "x", "name": "work"})
    assert calls.updates(plain, [{"sessionUpdate": "tool_call"}]) == []
    args = '{"task": "write docs\\nplease", "title": ""}'
    data = {"callId": "c", "name": "subagent", "arguments": args, "subagentSessionId": "kid"}
    call = event("tool/call", 6, {"turn": 1, "step": 1, **data})
    assert calls.updates(call, []) == []  # the call was not shown: nothing to announce
    assert calls.updates(call, [{"sessionUpdate": "tool_call"}]) == [
        {
            "sessionUpdate": "subagent_update",
            "sessionId": "kid",
            "title": "write docs",
            "state": {"state": "running"},
        }
    ]
    shown = [{"toolCallId": "c", "status": "failed" if failed else "completed"}]
    assert calls.updates(_result("c", error), shown) == [
        {"sessionUpdate": "subagent_update", "sessionId": "kid", "state": state}
    ]


def test_key_variables_of_the_models() -> None:
    assert key_env_of("openai:gpt-4.1", None, None) == "OPENAI_API_KEY"
    assert key_env_of("anthropic:claude", None, None) == "ANTHROPIC_API_KEY"
    assert key_env_of("openai:m", "http://127.0.0.1:9/v1", None) is None  # a local server
    assert key_env_of("openai:deepseek-chat", "https://api.deepseek.com", None) == (
        "DEEPSEEK_API_KEY"
    )
    assert key_env_of("openai:m", "http://127.0.0.1:9/v1", "MY_KEY") == "MY_KEY"


def test_cli_option_errors(tmp_path: Path) -> None:
    env = {"TODO_SESSIONS_URL": f"sqlite:///{tmp_path}/x.db"}
    for args, message in (
        (["--context-window", "100"], "go together"),
        (["--compact-at", "0.5"], "go together"),
        (["--compact-at", "1.5", "--context-window", "9"], "1.5"),
        (["--model", "nope"], "expected openai:MODEL"),
    ):
        result = CliRunner().invoke(main, ["acp", *args], env=env, input="")
        assert result.exit_code == 2 and message in result.output + result.stderr, args


class Quiet:
    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        return None


@pytest.mark.slow
async def test_acp_starts_without_the_key_and_offers_every_model(tmp_path: Path) -> None:
    pytest.importorskip("openai")
    env = {
        "TODO_SESSIONS_URL": f"sqlite:///{tmp_path}/m.db",
        "PYTHONPATH": os.pathsep.join(sys.path),
    }
    args = ["-m", "todo_sessions", "acp", "--model", "openai:one", "--model", "openai:two"]
    args += ["--base-url", "http://127.0.0.1:9/v1", "--api-key-env", "TODO_SESSIONS_NO_KEY"]
    args += ["--compact-at", "0.8", "--context-window", "1000"]
    async with acp.spawn_agent_process(Quiet(), sys.executable, *args, env=env) as (conn, _):
        init = await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        assert [m.id for m in init.auth_methods] == ["env:TODO_SESSIONS_NO_KEY"]
        with pytest.raises(acp.RequestError) as refused:
            await conn.authenticate(method_id="env:TODO_SESSIONS_NO_KEY")
        assert "TODO_SESSIONS_NO_KEY" in str(refused.value.data)
        new = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        option = new.config_options[0]
        assert option.current_value == "openai:one"
        assert [o.value for o in option.options] == ["openai:one", "openai:two"]


class Pipe:
    """A transport fed a list of messages; what is sent is kept."""

    def __init__(self, messages: list[dict[str, Any]]) -> None:
        self.incoming = list(messages)
        self.sent: list[dict[str, Any]] = []

    async def receive(self) -> dict[str, Any] | None:
        return self.incoming.pop(0) if self.incoming else None

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)

    async def close(self) -> None:
        return None


class Agent:
    client_capabilities_json: Any = None

    def __init__(self) -> None:
        self.cancelled: list[str] = []

    async def cancel_prompt_request(self, session_id: str) -> None:
        self.cancelled.append(session_id)


async def test_cancel_request_reaches_only_a_pending_prompt() -> None:
    from todo_sessions.acp.connection import _Tracking

    def request(request_id: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}

    def cancel(params: dict[str, Any]) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "method": "$/cancel_request", "params": params}

    caps = {"plan": {}, "subagents": {}}
    pipe = Pipe(
        [
            request(0, "initialize", {"clientCapabilities": caps}),
            request(1, "session/load", {"sessionId": "a"}),
            request("2", "session/prompt", {"sessionId": "b"}),
            request(3, "session/prompt", {"sessionId": "c"}),
            cancel({"requestId": 1}),  # not a prompt: runs to its answer
            cancel({"requestId": 2}),  # no request 2 (the prompt's id is the string "2")
            cancel({"requestId": "2"}),
            cancel({"requestId": 3}),  # answered already
            cancel({}),  # malformed: ignored
        ]
    )
    agent = Agent()
    tracking = _Tracking(pipe, agent)
    passed = []
    while (message := await tracking.receive()) is not None:
        passed.append(message.get("id"))
        if message.get("id") == 3:
            await tracking.send({"jsonrpc": "2.0", "id": 3, "result": {"stopReason": "end_turn"}})
    assert passed == [0, 1, "2", 3]  # the cancels themselves are not passed on
    assert agent.cancelled == ["b"]
    assert pipe.sent[-1]["id"] == 3
    assert agent.client_capabilities_json == caps
    assert ClientFeatures.of(agent.client_capabilities_json) == ClientFeatures(True, False, True)
