"""Live stream and replay agree: cancel at random points, and the repair of a crashed turn.

Each run cancels a prompt right after a seeded, random number of appended events (the cancel
happens inside the session's subscriber, so the point is exact). Then:

- the client never got a ``tool_call_update`` for a call it had not been shown a
  ``tool_call`` for;
- what the live client was sent equals the replay of the same events (``session/load`` into a
  second client), update for update, message ids included.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

from todo_sessions import SessionService, SessionStore
from todo_sessions.acp.agent import TodoSessionsAgent
from todo_sessions.acp.mapping import update_to_wire
from todo_sessions.core.repair import interrupted_turn_closers
from todo_sessions.harness import ScriptedModel, ScriptedResponse

RUNS = 50


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

    async def session_update(self, session_id: str, update: Any) -> None:
        wire = update_to_wire(update)
        lifecycle = wire["sessionUpdate"] in ("session_info_update", "usage_update")
        (self.lifecycle if lifecycle else self.sent).append(wire)


class Text:
    type = "text"

    def __init__(self, text: str) -> None:
        self.text = text


def script() -> ScriptedModel:
    plan = {"todos": [{"content": "a", "status": "in_progress"}]}
    return ScriptedModel(
        [
            ScriptedResponse(
                reasoning="think about it",
                text="let me work",
                tool_calls=[("todo_write", plan), ("work", {"task": "a"}), ("work", {"task": "b"})],
            ),
            ScriptedResponse(text="all done now", tool_calls=[("work", {"task": "c"})]),
            ScriptedResponse(text="finished"),
        ]
    )


def assert_only_shown_calls_updated(sent: list[dict[str, Any]]) -> None:
    shown: set[str] = set()
    for update in sent:
        if update["sessionUpdate"] == "tool_call":
            shown.add(update["toolCallId"])
        elif update["sessionUpdate"] == "tool_call_update":
            assert update["toolCallId"] in shown, f"update for unseen call {update}"


async def test_cancel_at_random_points_live_equals_replay(tmp_path: Path) -> None:
    store_url = f"sqlite:///{tmp_path}/live.db"
    models: list[ScriptedModel] = []

    def factory() -> ScriptedModel:
        models.append(script())
        return models[-1]

    service = SessionService(SessionStore(store_url), strict=True)
    agent = TodoSessionsAgent(service, model_factory=factory)
    rng = random.Random(13)
    reasons: set[str] = set()
    unseen_results = 0  # runs where a call was answered "not run" without ever being shown
    for run in range(RUNS):
        conn = FakeConn()
        agent.on_connect(conn)
        sid = (await agent.new_session(cwd=str(tmp_path))).session_id
        session = service.get(sid)
        cut = rng.randint(1, 45)  # a full turn appends about 40 events

        def cancel_at(event: Any, sid: str = sid, cut: int = cut) -> None:
            if event.seq == cut and sid in agent._loops:
                agent._loops[sid].cancel()

        unsubscribe = session.subscribe(cancel_at)
        response = await asyncio.wait_for(agent.prompt(session_id=sid, prompt=[Text("go")]), 30)
        unsubscribe()
        reasons.add(response.stop_reason)
        assert_only_shown_calls_updated(conn.sent)
        log = await stored(service, sid)
        started = {e.data["callId"] for e in log if e.type == "tool/call"}
        results = [e.data["message"]["source"]["callId"] for e in log if e.type == "tool/result"]
        unseen_results += any(call_id not in started for call_id in results)

        viewer = FakeConn()
        agent.on_connect(viewer)
        await agent.load_session(cwd=str(tmp_path), session_id=sid)
        replayed = [u for u in viewer.sent if u["sessionUpdate"] != "user_message_chunk"]
        assert replayed == conn.sent, f"run {run} (cancel after seq {cut})"
    assert reasons == {"cancelled", "end_turn"}  # both paths were exercised
    assert unseen_results > 0  # and the case of a call the client never saw
    await service.aclose()


async def test_the_repair_of_a_crashed_turn_is_streamed_before_the_turn(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/crash.db"
    owner = SessionService(SessionStore(url), strict=True)
    session = await owner.new(cwd=str(tmp_path))
    sid = session.id
    append = session.append
    append("turn/start", {"turn": 1})
    user = {"id": "u1", "role": "user", "content": [{"type": "text", "text": "x"}]}
    append("user/message", {**user, "source": {"kind": "user"}}, surface_op="append")
    append("step/start", {"turn": 1, "step": 1})
    calls = [
        {"type": "tool-call", "id": "c1", "name": "work", "arguments": '{"task": "t"}'},
        {"type": "tool-call", "id": "c2", "name": "work", "arguments": '{"task": "u"}'},
    ]
    source = {"kind": "model", "provider": "p", "model": "m"}
    message = {"id": "a1", "role": "assistant", "content": calls, "source": source}
    append(
        "assistant/message",
        {"turn": 1, "step": 1, "message": message},
        surface_op="append",
        source_event_seqs=[],
    )
    append("tool/call", {"turn": 1, "step": 1, "callId": "c1", "name": "work", "arguments": "{}"})
    await owner.flush(sid)
    crashed = await stored(owner, sid)
    await owner.aclose()  # the process "dies" here: the turn stays open in the store

    service = SessionService(SessionStore(url), strict=True)
    agent = TodoSessionsAgent(
        service, model_factory=lambda: ScriptedModel([ScriptedResponse("ok")])
    )
    conn = FakeConn()
    agent.on_connect(conn)
    await agent.load_session(cwd=str(tmp_path), session_id=sid)
    loaded = len(conn.sent)
    assert [u["sessionUpdate"] for u in conn.sent[-1:]] == ["tool_call"]  # c1, in progress
    assert await agent.prompt(session_id=sid, prompt=[Text("again")])
    streamed = conn.sent[loaded:]
    assert streamed[0] == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "c1",
        "status": "failed",
        "content": streamed[0]["content"],
    }
    assert "is unknown" in streamed[0]["content"][0]["content"]["text"]
    assert all(u.get("toolCallId") != "c2" for u in conn.sent)  # c2 was never shown
    closers = interrupted_turn_closers(crashed, session_id=sid)
    events = await stored(service, sid)
    assert [e.to_json() for e in events[len(crashed) : len(crashed) + len(closers)]] == [
        e.to_json() for e in closers
    ]
    viewer = FakeConn()
    agent.on_connect(viewer)
    await agent.load_session(cwd=str(tmp_path), session_id=sid)
    assert [u for u in viewer.sent if u["sessionUpdate"] != "user_message_chunk"] == [
        u for u in conn.sent if u["sessionUpdate"] != "user_message_chunk"
    ]
    await service.aclose()
