"""``todo-sessions acp --model``'s tools (`todo_tools(service)`): the model is offered
``todo_write`` and ``subagent``; a child's plan stays the child's (the editor's plan for the
session is the parent's own list), and the call's result is the child's answer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("acp")

from todo_sessions import SessionService, SessionStore
from todo_sessions.acp.agent import TodoSessionsAgent
from todo_sessions.acp.builtin import todo_tools
from todo_sessions.acp.mapping import update_to_wire
from todo_sessions.harness import ScriptedModel, ScriptedResponse

PARENT_PLAN = {"todos": [{"content": "delegate", "status": "in_progress"}]}
CHILD_PLAN = {"todos": [{"content": "count the tests", "status": "in_progress"}]}


class Conn:
    def __init__(self) -> None:
        self.updates: list[tuple[str, dict[str, Any]]] = []

    async def session_update(self, session_id: str, update: Any) -> None:
        self.updates.append((session_id, update_to_wire(update)))


class Text:
    type = "text"

    def __init__(self, text: str) -> None:
        self.text = text


def test_the_tools_of_acp_model() -> None:
    assert todo_tools().names() == ["todo_write"]
    service = SessionService(SessionStore("sqlite://"))
    assert todo_tools(service).names() == ["todo_write", "subagent"]


async def test_a_subagent_call_through_the_acp_agent(tmp_path: Path) -> None:
    model = ScriptedModel(  # one model: the parent's calls and the child's, in order
        [
            ScriptedResponse(
                tool_calls=[("todo_write", PARENT_PLAN), ("subagent", {"task": "count"})]
            ),
            ScriptedResponse(tool_calls=[("todo_write", CHILD_PLAN)]),
            ScriptedResponse(text="12 tests."),
            ScriptedResponse(text="The child counted 12 tests."),
        ]
    )
    service = SessionService(SessionStore(f"sqlite:///{tmp_path}/a.db"), strict=True)
    agent = TodoSessionsAgent(
        service, model_factory=lambda: model, tools_factory=lambda: todo_tools(service)
    )
    conn = Conn()
    agent.on_connect(conn)
    sid = (await agent.new_session(cwd=str(tmp_path))).session_id
    assert (await agent.prompt(session_id=sid, prompt=[Text("go")])).stop_reason == "end_turn"
    plans = [u for s, u in conn.updates if u["sessionUpdate"] == "plan" and s == sid]
    assert plans and all(p["entries"][0]["content"] == "delegate" for p in plans)
    results = [
        u
        for _, u in conn.updates
        if u["sessionUpdate"] == "tool_call_update" and u.get("status") == "completed"
    ]
    assert any("12 tests." in str(u.get("content")) for u in results)
    await service.flush()
    (child,) = await service.store.children(sid)
    assert (child.status, child.title) == ("completed", "count")
    assert [t.content for t in await service.store.current_todos(sid) or []] == ["delegate"]
    assert [t.content for t in await service.store.current_todos(child.id) or []] == [
        "count the tests"
    ]
    child_log = (await service.store.read(child.id)).events
    (header,) = [e for e in child_log if e.type == "request/header"]
    assert header.data["header"]["config"]["model"] == model.model  # the parent's model
    await service.aclose()


@pytest.mark.slow
async def test_a_child_that_completed_before_a_kill_is_announced_end_turn(
    tmp_path: Path,
) -> None:
    """kill -9 of the parent's process after its child completed (the parent's call left
    open), then a client that advertises ``subagents`` loads and prompts the parent: the
    repair answers the call "outcome unknown", yet the child is announced idle ``end_turn``,
    as `SessionStore.children` and the child's own log say, live and in a replay alike."""
    from test_subagent import run_until_killed

    url = f"sqlite:///{tmp_path}/k.db"
    run_until_killed(url, "boss", "after-child")

    async def client(service: SessionService) -> tuple[TodoSessionsAgent, Conn]:
        model = ScriptedModel([ScriptedResponse(text="Picking up where we were.")])
        agent = TodoSessionsAgent(
            service, model_factory=lambda: model, tools_factory=lambda: todo_tools(service)
        )
        conn = Conn()
        agent.on_connect(conn)
        agent.client_capabilities_json = {"subagents": {}}
        await agent.initialize(protocol_version=1)
        return agent, conn

    def shown(conn: Conn) -> list[dict[str, Any]]:
        skip = ("user_message_chunk", "session_info_update", "usage_update")
        return [u for s, u in conn.updates if s == "boss" and u["sessionUpdate"] not in skip]

    service = SessionService(SessionStore(url), strict=True)
    (child,) = await service.store.children("boss")
    assert child.status == "completed"
    agent, conn = await client(service)
    await agent.load_session(cwd=str(tmp_path), session_id="boss")
    prompt = [Text("carry on")]
    assert (await agent.prompt(session_id="boss", prompt=prompt)).stop_reason == "end_turn"
    subs = [u for u in shown(conn) if u["sessionUpdate"] == "subagent_update"]
    assert [u["sessionId"] for u in subs] == [child.id, child.id]
    assert [u["state"] for u in subs] == [
        {"state": "running"},
        {"state": "idle", "stopReason": "end_turn"},
    ]
    repaired = [u for u in shown(conn) if u.get("status") == "failed"]
    assert len(repaired) == 1  # the call itself is shown as the repair closed it
    assert [c.status for c in await service.store.children("boss")] == ["completed"]
    await agent.aclose()
    await service.aclose()

    service = SessionService(SessionStore(url), strict=True)
    loader, loaded = await client(service)
    await loader.load_session(cwd=str(tmp_path), session_id="boss")
    resent = [u for u in shown(conn) if u["sessionUpdate"] != "plan"]  # a prompt resends it
    assert [u for u in shown(loaded) if u["sessionUpdate"] != "plan"] == resent
    await loader.aclose()
    await service.aclose()
