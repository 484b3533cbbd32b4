"""The ACP agent in process, with a fake connection: plan re-send, cancel, stop reasons."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from todo_sessions import SessionService, SessionStore
from todo_sessions.acp import agent as agent_module
from todo_sessions.acp.agent import TodoSessionsAgent
from todo_sessions.acp.builtin import builtin_tools
from todo_sessions.acp.mapping import replay_updates, update_to_wire
from todo_sessions.harness import ScriptedModel, ScriptedResponse


async def stored(service: SessionService, session_id: str) -> list[Any]:
    """The whole log of a session (a live session holds only what it was not told to drop)."""
    if session_id in service.live_ids():
        await service.flush(session_id)
    return list((await service.store.read(session_id)).events)


class FakeConn:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.lifecycle: list[dict[str, Any]] = []
        """``session_info_update`` and ``usage_update``: not part of the conversation."""
        self.streaming = asyncio.Event()

    async def session_update(self, session_id: str, update: Any) -> None:
        wire = update_to_wire(update)
        lifecycle = wire["sessionUpdate"] in ("session_info_update", "usage_update")
        (self.lifecycle if lifecycle else self.sent).append(wire)
        self.streaming.set()


class Text:
    type = "text"

    def __init__(self, text: str) -> None:
        self.text = text


async def make(tmp_path: Any, model: Any = None) -> tuple[TodoSessionsAgent, FakeConn]:
    service = SessionService(SessionStore(f"sqlite:///{tmp_path}/a.db"), strict=True)
    if model is None:
        agent = TodoSessionsAgent(service)
    else:
        agent = TodoSessionsAgent(service, model_factory=lambda: model)
    conn = FakeConn()
    agent.on_connect(conn)
    return agent, conn


async def test_unfinished_plan_is_sent_again_at_the_start_of_a_prompt(tmp_path: Any) -> None:
    agent, conn = await make(tmp_path)
    sid = (await agent.new_session(cwd=str(tmp_path))).session_id
    assert (await agent.prompt(session_id=sid, prompt=[Text("a\nb")])).stop_reason == "end_turn"
    session = agent.service.get(sid)
    session.append("turn/start", {"turn": 2})
    session.append("todo/write", {"todos": [{"content": "left over", "status": "in_progress"}]})
    session.append("turn/end", {"turn": 2, "reason": {"kind": "interrupted"}})
    conn.sent.clear()
    await agent.prompt(session_id=sid, prompt=[Text("c")])
    first = conn.sent[0]
    assert first == {
        "sessionUpdate": "plan",
        "entries": [{"content": "left over", "status": "in_progress", "priority": "medium"}],
    }
    await agent.service.aclose()


async def test_cancel_ends_the_prompt_as_cancelled(tmp_path: Any) -> None:
    slow = ScriptedModel([ScriptedResponse(text="a b c d e f g h", delay=0.2)])
    agent, conn = await make(tmp_path, slow)
    sid = (await agent.new_session(cwd=str(tmp_path))).session_id
    running = asyncio.create_task(agent.prompt(session_id=sid, prompt=[Text("x")]))
    await asyncio.wait_for(conn.streaming.wait(), 5)  # the model is mid-stream
    await agent.cancel(session_id=sid)
    assert (await asyncio.wait_for(running, 5)).stop_reason == "cancelled"
    events = await stored(agent.service, sid)
    assert events[-1].data["reason"] == {"kind": "aborted"}
    await agent.service.aclose()


async def test_unknown_session_and_builtin_tools(tmp_path: Any) -> None:
    from acp import RequestError

    agent, _ = await make(tmp_path)
    with pytest.raises(RequestError) as info:
        await agent.prompt(session_id="nope", prompt=[Text("x")])
    assert info.value.code == -32002
    tools = builtin_tools()
    assert tools.present_call("work", {"task": "t"})["title"] == "Work on: t"
    await agent.service.aclose()


async def test_live_text_is_streamed_once_chunk_by_chunk(tmp_path: Any) -> None:
    model = ScriptedModel([ScriptedResponse(reasoning="hmm, ok", text="all done here")])
    agent, conn = await make(tmp_path, model)
    sid = (await agent.new_session(cwd=str(tmp_path))).session_id
    await agent.prompt(session_id=sid, prompt=[Text("x")])
    said = [u for u in conn.sent if u["sessionUpdate"] == "agent_message_chunk"]
    thought = [u for u in conn.sent if u["sessionUpdate"] == "agent_thought_chunk"]
    assert "".join(u["content"]["text"] for u in said) == "all done here"
    assert len(said) == 3 and {u["messageId"] for u in said} == {"seq-3"}  # the first chunk
    assert "".join(u["content"]["text"] for u in thought) == "hmm, ok"
    assert {u["messageId"] for u in thought} == {"seq-3-thought"}
    events = await stored(agent.service, sid)
    replayed = [update_to_wire(u) for u in replay_updates(events)]
    assert [u for u in replayed if u["sessionUpdate"] != "user_message_chunk"] == conn.sent
    await agent.service.aclose()


async def test_a_refused_prompt_leaves_the_session_usable(tmp_path: Any) -> None:
    from acp import RequestError

    agent, _ = await make(tmp_path)
    sid = (await agent.new_session(cwd=str(tmp_path))).session_id
    with pytest.raises(RequestError) as info:
        await agent.prompt(session_id=sid, prompt=[Text("bad \ud800 text")])
    assert info.value.code == -32602  # invalid params, not an internal error
    assert agent.service.get(sid).next_seq == 0  # nothing appended, no turn left open
    assert (await agent.prompt(session_id=sid, prompt=[Text("fine")])).stop_reason == "end_turn"
    with pytest.raises(RequestError) as info:
        await agent.new_session(cwd="relative/path")
    assert info.value.code == -32602
    await agent.service.aclose()


async def test_a_second_concurrent_prompt_is_refused_and_the_first_completes(
    tmp_path: Any,
) -> None:
    from acp import RequestError

    slow = ScriptedModel([ScriptedResponse(text="a b c d", delay=0.05)])
    agent, conn = await make(tmp_path, slow)
    sid = (await agent.new_session(cwd=str(tmp_path))).session_id
    first = asyncio.create_task(agent.prompt(session_id=sid, prompt=[Text("one")]))
    await asyncio.wait_for(conn.streaming.wait(), 5)
    with pytest.raises(RequestError) as info:
        await agent.prompt(session_id=sid, prompt=[Text("two")])
    assert info.value.code == -32600
    assert (await asyncio.wait_for(first, 5)).stop_reason == "end_turn"
    await agent.service.aclose()


async def test_load_only_reads_while_another_process_owns_the_turn(tmp_path: Any) -> None:
    owner, _ = await make(tmp_path)
    sid = (await owner.new_session(cwd=str(tmp_path))).session_id
    live = owner.service.get(sid)
    live.append("turn/start", {"turn": 1})
    await owner.service.flush(sid)  # a turn in progress, stored, in "another process"
    viewer, _ = await make(tmp_path)
    await viewer.load_session(cwd=str(tmp_path), session_id=sid)
    assert await viewer.service.store.count(sid) == 1  # no closers appended by a mere load
    live.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    await owner.service.flush(sid)  # the owner carries on undisturbed
    await viewer.service.aclose()
    await owner.service.aclose()


async def test_a_replay_over_many_pages_is_the_whole_log_in_order(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pages of 3 events (the next one read ahead): the updates of the whole log, once each,
    in log order, exactly those of `replay_updates` (the models' path)."""
    monkeypatch.setattr(agent_module, "_REPLAY_PAGE", 3)
    agent, conn = await make(tmp_path)
    sid = (await agent.new_session(cwd=str(tmp_path))).session_id
    for prompt in ("first\nline", "second", "third"):
        await agent.prompt(session_id=sid, prompt=[Text(prompt)])
    await agent.service.flush(sid)
    events = await agent.service.store.read_from(sid, 0)
    assert len(events) > 9
    conn.sent.clear()
    await agent.load_session(cwd=str(tmp_path), session_id=sid)
    shown = replay_updates(events, present_call=builtin_tools().present_call)
    expected = [update_to_wire(u) for u in shown]
    assert conn.sent == expected
    assert [u["messageId"] for u in expected if u["sessionUpdate"] == "user_message_chunk"] == [
        f"seq-{e.seq}" for e in events if e.type == "user/message"
    ]
    await agent.service.aclose()
