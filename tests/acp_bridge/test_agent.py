"""The ACP agent end to end over real stdio subprocesses, with the official SDK's client.

The SDK's client handles notifications concurrently, so these tests record the raw wire with a
connection observer (called synchronously as each message arrives) and assert on that order.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import acp
import pytest
from acp.connection import StreamEvent

from todo_sessions import SessionStore

pytestmark = pytest.mark.slow


class Recorder:
    """A minimal ACP client that records every incoming message in wire order."""

    def __init__(self) -> None:
        self.wire: list[dict[str, Any]] = []

    def observe(self, event: StreamEvent) -> None:
        if event.direction.value == "incoming":
            self.wire.append(event.message)

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        return None

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover
        raise acp.RequestError.method_not_found("session/request_permission")

    def updates(self) -> list[dict[str, Any]]:
        return [m["params"]["update"] for m in self.wire if m.get("method") == "session/update"]

    def plans(self) -> list[list[tuple[str, str]]]:
        return [
            [(e["content"], e["status"]) for e in u["entries"]]
            for u in self.updates()
            if u["sessionUpdate"] == "plan"
        ]


def agent_command(url: str) -> tuple[str, list[str], dict[str, str]]:
    env = {"TODO_SESSIONS_URL": url, "PYTHONPATH": os.pathsep.join(sys.path)}
    return sys.executable, ["-m", "todo_sessions", "acp"], env


async def run_client(url: str, work: Any) -> Recorder:
    recorder = Recorder()
    command, args, env = agent_command(url)
    async with acp.spawn_agent_process(
        recorder, command, *args, env=env, observers=[recorder.observe]
    ) as (conn, _proc):
        init = await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        assert init.agent_capabilities is not None and init.agent_capabilities.load_session
        await work(conn, recorder)
    return recorder


async def test_prompt_then_load_from_a_second_process(shared_db_url: str, tmp_path: Path) -> None:
    state: dict[str, Any] = {}

    async def first(conn: Any, rec: Recorder) -> None:
        new = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        state["id"] = new.session_id
        response = await conn.prompt(
            session_id=new.session_id,
            prompt=[acp.text_block("write the tests\nfix the bug\nship it")],
        )
        state["stop"] = response.stop_reason

    live = await run_client(shared_db_url, first)
    assert state["stop"] == "end_turn"
    plans = live.plans()
    tasks = ["write the tests", "fix the bug", "ship it"]
    assert plans[0] == [(tasks[0], "in_progress"), (tasks[1], "pending"), (tasks[2], "pending")]
    assert plans[-1] == [(t, "completed") for t in tasks]
    kinds = [u["sessionUpdate"] for u in live.updates()]
    assert "tool_call" in kinds and "tool_call_update" in kinds and "agent_message_chunk" in kinds
    assert "user_message_chunk" not in kinds  # the client's own prompt is not echoed live

    async with SessionStore(shared_db_url) as store:
        final_todos = await store.current_todos(state["id"])
        stored_before = await store.count(state["id"])
    assert [(t.content, t.status) for t in final_todos or []] == plans[-1]

    async def second(conn: Any, rec: Recorder) -> None:
        await conn.load_session(cwd=str(tmp_path), session_id=state["id"], mcp_servers=[])
        state["load_index"] = next(
            i for i, m in enumerate(rec.wire) if "result" in m and m.get("id") is not None and i > 0
        )
        response = await conn.prompt(session_id=state["id"], prompt=[acp.text_block("one more")])
        state["stop2"] = response.stop_reason

    replay = await run_client(shared_db_url, second)
    load_response_at = state["load_index"]
    replayed = [
        m["params"]["update"]
        for m in replay.wire[:load_response_at]
        if m.get("method") == "session/update"
    ]
    assert replayed, "load_session answered before replaying anything"
    replay_plans = [
        [(e["content"], e["status"]) for e in u["entries"]]
        for u in replayed
        if u["sessionUpdate"] == "plan"
    ]
    assert replay_plans[-1] == plans[-1]
    assert len(replay_plans) == len(plans)
    assert replayed[0]["sessionUpdate"] == "user_message_chunk"
    assert state["stop2"] == "end_turn"
    async with SessionStore(shared_db_url) as store:
        events = await store.read_from(state["id"])
    assert [e.seq for e in events] == list(range(len(events)))
    assert len(events) > stored_before
    assert sum(1 for e in events if e.type == "turn/start") == 2


async def test_load_of_an_unknown_session_is_resource_not_found(
    shared_db_url: str, tmp_path: Path
) -> None:
    async def work(conn: Any, rec: Recorder) -> None:
        with pytest.raises(acp.RequestError) as info:
            await conn.load_session(cwd=str(tmp_path), session_id="no-such-session", mcp_servers=[])
        assert info.value.code == -32002

    await run_client(shared_db_url, work)
