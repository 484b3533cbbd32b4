"""The session lifecycle in process, with a fake connection: usage after a turn, plan
updates by capability, resume and its repair, close during a prompt, fork at the last
closed turn, and the cursor codec."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from acp import RequestError
from acp.schema import ClientCapabilities, PlanCapabilities

from todo_sessions import SessionService, SessionStore
from todo_sessions.acp.agent import TodoSessionsAgent
from todo_sessions.acp.listing import CursorError, decode_cursor, encode_cursor, first_line
from todo_sessions.acp.mapping import update_to_wire
from todo_sessions.acp.usage import tokens_used
from todo_sessions.harness import ScriptedModel, ScriptedResponse


class FakeConn:
    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []
        self.streaming = asyncio.Event()

    async def session_update(self, session_id: str, update: Any) -> None:
        self.sent.append((session_id, update_to_wire(update)))
        self.streaming.set()

    def kinds(self, session_id: str | None = None) -> list[str]:
        return [u["sessionUpdate"] for s, u in self.sent if session_id in (None, s)]


class Text:
    type = "text"

    def __init__(self, text: str) -> None:
        self.text = text


async def make(
    tmp_path: Any, model: Any = None, *, owner: str | None = None, plan: bool = False
) -> tuple[TodoSessionsAgent, FakeConn]:
    service = SessionService(SessionStore(f"sqlite:///{tmp_path}/a.db"), owner=owner)
    if model is None:
        agent = TodoSessionsAgent(service, follow_interval=0.02)
    else:
        agent = TodoSessionsAgent(service, model_factory=lambda: model, follow_interval=0.02)
    conn = FakeConn()
    agent.on_connect(conn)
    capabilities = ClientCapabilities(plan=PlanCapabilities()) if plan else ClientCapabilities()
    await agent.initialize(protocol_version=1, client_capabilities=capabilities)
    return agent, conn


async def shut(agent: TodoSessionsAgent) -> None:
    await agent.aclose()
    await agent.service.aclose()


async def test_usage_after_each_turn_equals_the_stored_usage(tmp_path: Any) -> None:
    model = ScriptedModel(
        [ScriptedResponse(text="one two three"), ScriptedResponse(text="four five")]
    )
    agent, conn = await make(tmp_path, model)
    sid = (await agent.new_session(cwd=str(tmp_path))).session_id
    usages = []
    for prompt in ("a", "b"):
        await agent.prompt(session_id=sid, prompt=[Text(prompt)])
        assert conn.kinds(sid)[-1] == "usage_update"
        usages.append(conn.sent[-1][1])
        await agent.service.flush(sid)
        stored = await agent.service.store.usage(sid)
        assert usages[-1]["used"] == tokens_used(stored.total)
    assert [u["used"] for u in usages] == [3, 5]  # the scripted model's outputTokens, summed
    assert all(u["size"] == 0 and "cost" not in u for u in usages)

    # resumed by another agent: its first usage_update reads the stored total once
    await agent.close_session(session_id=sid)
    other, conn2 = await make(tmp_path, ScriptedModel([ScriptedResponse(text="six")]))
    await other.resume_session(cwd=str(tmp_path), session_id=sid)
    await other.prompt(session_id=sid, prompt=[Text("c")])
    assert conn2.sent[-1][1]["used"] == 6
    await shut(other)
    await shut(agent)


async def test_plan_update_instead_of_plan_only_for_clients_that_ask(tmp_path: Any) -> None:
    """A client with ``plan`` gets each list once, as a ``plan_update`` (never the legacy
    ``plan`` too); one without gets the legacy ``plan`` only."""
    lists = {}
    for plan in (False, True):
        agent, conn = await make(tmp_path / str(plan), plan=plan)
        sid = (await agent.new_session(cwd=str(tmp_path))).session_id
        await agent.prompt(session_id=sid, prompt=[Text("a\nb")])
        plans = [u["entries"] for _, u in conn.sent if u["sessionUpdate"] == "plan"]
        items = [u["plan"] for _, u in conn.sent if u["sessionUpdate"] == "plan_update"]
        if plan:
            assert plans == [] and items
            assert {i["planId"] for i in items} == {"main"}
            assert {i["type"] for i in items} == {"items"}
            lists[plan] = [i["entries"] for i in items]
        else:
            assert items == [] and plans
            lists[plan] = plans
        await shut(agent)
    assert lists[True] == lists[False]  # the same lists, one way or the other


async def test_resume_repairs_an_interrupted_turn_and_streams_the_repair_at_the_prompt(
    tmp_path: Any,
) -> None:
    first, _ = await make(tmp_path)
    sid = (await first.new_session(cwd=str(tmp_path))).session_id
    await first.prompt(session_id=sid, prompt=[Text("a")])
    live = first.service.get(sid)
    live.append("turn/start", {"turn": 2})
    live.append("step/start", {"turn": 2, "step": 1})
    message = {
        "id": "m1",
        "role": "assistant",
        "content": [{"type": "tool-call", "id": "c9", "name": "work", "arguments": "{}"}],
        "source": {"kind": "model", "provider": "p", "model": "m"},
    }
    live.append(
        "assistant/message", {"turn": 2, "step": 1, "message": message}, surface_op="append"
    )
    live.append(
        "tool/call", {"turn": 2, "step": 1, "callId": "c9", "name": "work", "arguments": "{}"}
    )
    await first.service.flush(sid)
    await first.service.discard(sid)  # "crashed": the turn stays open in the store
    stored = await first.service.store.count(sid)

    agent, conn = await make(tmp_path)
    await agent.resume_session(cwd=str(tmp_path), session_id=sid)
    assert conn.kinds(sid) == ["session_info_update"]  # no replay
    assert await agent.service.store.count(sid) > stored  # repaired durably on resume
    last = await agent.service.store.latest_event(sid, "turn/start", "turn/end")
    assert last is not None and last.type == "turn/end"
    await agent.prompt(session_id=sid, prompt=[Text("b")])
    repair = [u for _, u in conn.sent[1:] if u.get("toolCallId") == "c9"]
    assert [(u["sessionUpdate"], u["status"]) for u in repair] == [("tool_call_update", "failed")]
    await shut(agent)
    await first.service.aclose()


async def test_close_cancels_a_running_prompt_and_releases_the_lease(tmp_path: Any) -> None:
    slow = ScriptedModel([ScriptedResponse(text="a b c d e f g h", delay=0.2)])
    agent, conn = await make(tmp_path, slow)
    sid = (await agent.new_session(cwd=str(tmp_path))).session_id
    running = asyncio.create_task(agent.prompt(session_id=sid, prompt=[Text("x")]))
    await asyncio.wait_for(conn.streaming.wait(), 5)
    await agent.close_session(session_id=sid)
    assert (await asyncio.wait_for(running, 5)).stop_reason == "cancelled"
    assert sid not in agent.service.live_ids()
    holders = await agent.service.store.lease_holders([sid])
    assert sid not in holders or holders[sid].owner != agent.service.owner
    await agent.close_session(session_id=sid)  # idempotent
    with pytest.raises(RequestError) as info:
        await agent.close_session(session_id="nope")
    assert info.value.code == -32002
    slow.responses = [*slow.responses, ScriptedResponse(text="again")]
    reply = await agent.prompt(session_id=sid, prompt=[Text("y")])  # resumes it
    assert reply.stop_reason == "end_turn" and sid in agent.service.live_ids()
    await shut(agent)


async def test_fork_of_a_session_with_an_open_turn_forks_at_the_last_closed_turn(
    tmp_path: Any,
) -> None:
    agent, _ = await make(tmp_path)
    sid = (await agent.new_session(cwd=str(tmp_path))).session_id
    await agent.prompt(session_id=sid, prompt=[Text("a")])
    closed = agent.service.get(sid).next_seq
    agent.service.get(sid).append("turn/start", {"turn": 2})
    fork = (await agent.fork_session(cwd=str(tmp_path), session_id=sid)).session_id
    store = agent.service.store
    summary = await store.summary(fork)
    assert summary.parent == sid
    assert summary.next_seq == closed + 1  # the closed turns and session/end-seed
    assert [s.id for s in await store.list(parent=sid)] == [fork]
    await shut(agent)


def test_cursors_round_trip_and_refuse_what_they_did_not_make() -> None:
    cursor = encode_cursor("store-a", 1_764_000_000_123, "session/ü")
    assert decode_cursor(cursor, "store-a") == (1_764_000_000_123, "session/ü")
    with pytest.raises(CursorError, match="another session store"):
        decode_cursor(cursor, "store-b")
    for bad in ("", "!!!", "bm90IGpzb24", "WzFd", encode_cursor("store-a", 1, "x")[:-3]):
        with pytest.raises(CursorError):
            decode_cursor(bad, "store-a")


def test_first_line_titles() -> None:
    text = {"content": [{"type": "image"}, {"type": "text", "text": "\n  fix it  \nnow"}]}
    assert first_line(text) == "fix it"
    assert first_line({"content": [{"type": "text", "text": "x" * 500}]}) == "x" * 119 + "…"
    assert first_line({"content": []}) is None


async def test_list_pages_stay_stable_while_sessions_are_appended_to(tmp_path: Any) -> None:
    service = SessionService(SessionStore(f"sqlite:///{tmp_path}/l.db"))
    agent = TodoSessionsAgent(service, list_page_size=3)
    ids = []
    for _ in range(8):
        session = await service.new(cwd=str(tmp_path))
        session.append("turn/start", {"turn": 1})
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        await service.flush(session.id)
        ids.append(session.id)
    # the store's order: newest activity first, ties (the same millisecond) broken by id
    listed = [s.id for s in await service.store.list(limit=100)]
    assert sorted(listed) == sorted(ids)
    first = await agent.list_sessions()
    assert [s.session_id for s in first.sessions] == listed[:3]
    moved = listed[-1]  # the oldest, on the last page: new activity moves it to the front
    service.get(moved).append("turn/start", {"turn": 2})
    await service.flush(moved)
    seen = [s.session_id for s in first.sessions]
    cursor = first.next_cursor
    while cursor is not None:
        page = await agent.list_sessions(cursor=cursor)
        seen += [s.session_id for s in page.sessions]
        cursor = page.next_cursor
    assert seen == listed[:-1]  # every other session once; the moved one is on page one now
    again = await agent.list_sessions()
    assert moved in [s.session_id for s in again.sessions]
    with pytest.raises(RequestError) as info:
        await agent.list_sessions(cursor=first.next_cursor + "x")  # type: ignore[operator]
    assert info.value.code == -32602
    await shut(agent)


def _forged(payload: dict[str, Any]) -> str:
    """A cursor of the right shape with the store's id, its position chosen by a client."""
    import base64
    import json

    raw = json.dumps(payload, ensure_ascii=True).encode("utf-8")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


FORGED_POSITIONS: list[tuple[Any, Any]] = [
    (2**63, "s"),
    (2**64 + 5, "s"),
    (-(2**63) - 1, "s"),
    (-1, "s"),
    (1.5, "s"),
    (True, "s"),
    (None, "s"),
    (1, ""),
    (1, "a\x00b"),
    (1, "\ud800"),
    (1, "x" * 201),
    (1, ["s"]),
    (1, 7),
]


@pytest.mark.parametrize(("updated_at", "session_id"), FORGED_POSITIONS)
def test_a_forged_cursor_position_is_refused(updated_at: Any, session_id: Any) -> None:
    cursor = _forged({"v": 1, "store": "store-a", "u": updated_at, "id": session_id})
    with pytest.raises(CursorError):
        decode_cursor(cursor, "store-a")


async def test_forged_cursors_and_bad_cwds_are_invalid_params(db_url: str) -> None:
    """Through the agent, on every backend: the client's values never reach the driver."""
    service = SessionService(SessionStore(db_url))
    agent = TodoSessionsAgent(service)
    try:
        store_id = service.store.store_id
        for updated_at, session_id in FORGED_POSITIONS:
            cursor = _forged({"v": 1, "store": store_id, "u": updated_at, "id": session_id})
            with pytest.raises(RequestError) as caught:
                await agent.list_sessions(cursor=cursor)
            assert caught.value.code == -32602, (updated_at, session_id)
        for cwd in ("/repo\x00/x", "/repo/\udc80", "/" * 5000):
            with pytest.raises(RequestError) as caught:
                await agent.list_sessions(cwd=cwd)
            assert caught.value.code == -32602 and "cwd" in str(caught.value.data), cwd
        assert (await agent.list_sessions(cwd="/nowhere")).sessions == []
    finally:
        await shut(agent)
