"""The newer ACP updates in process (compaction, plan operations, subagents, config options,
auth, cancel), for a client that advertises everything and one that advertises nothing, live
and replayed: `scripted_agent` runs the real loop with scripted models."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from scripted_agent import KEY_ENV, make_agent

from todo_sessions import SessionService, SessionStore
from todo_sessions.acp import _sdk
from todo_sessions.acp.mapping import replay_updates, update_to_wire

EVERYTHING = {"plan": {}, "subagents": {}, "session": {"compaction": {}}}
LIFECYCLE = ("session_info_update", "usage_update")
NEW_KINDS = {
    "compaction_update",
    "compaction_summary_chunk",
    "plan_update",
    "plan_removed",
    "subagent_update",
}
PROMPTS = ["plan nosummary", "delegate tests", "fail lint", "hello"]


class FakeConn:
    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []
        self.streaming = asyncio.Event()

    async def session_update(self, session_id: str, update: Any) -> None:
        wire = update_to_wire(update)
        if wire["sessionUpdate"] not in LIFECYCLE:
            self.sent.append((session_id, wire))
        self.streaming.set()

    def of(self, session_id: str, *, prompts: bool = True) -> list[dict[str, Any]]:
        return [
            u
            for s, u in self.sent
            if s == session_id and (prompts or u["sessionUpdate"] != "user_message_chunk")
        ]


class Text:
    type = "text"

    def __init__(self, text: str) -> None:
        self.text = text


async def connect(
    service: SessionService, capabilities: dict[str, Any] | None
) -> tuple[Any, FakeConn, Any]:
    agent = make_agent(service)
    conn = FakeConn()
    agent.on_connect(conn)
    agent.client_capabilities_json = capabilities
    init = await agent.initialize(protocol_version=1)
    return agent, conn, init


async def run_script(tmp_path: Any, capabilities: dict[str, Any] | None) -> dict[str, Any]:
    """The scripted prompts, live, then a fresh client's load of the parent and children."""
    url = f"sqlite:///{tmp_path}/f.db"
    service = SessionService(SessionStore(url), strict=True)
    agent, conn, _ = await connect(service, capabilities)
    sid = (await agent.new_session(cwd=str(tmp_path))).session_id
    stops = [(await agent.prompt(session_id=sid, prompt=[Text(p)])).stop_reason for p in PROMPTS]
    await agent.aclose()
    await service.aclose()
    service = SessionService(SessionStore(url), strict=True)
    loader, loaded, _ = await connect(service, capabilities)
    kids = await service.store.list(parent=sid)
    await loader.load_session(cwd=str(tmp_path), session_id=sid)
    for kid in kids:
        await loader.load_session(cwd=str(tmp_path), session_id=kid.id)
    events = list((await service.store.read(sid)).events)
    await loader.aclose()
    await service.aclose()
    return {
        "sid": sid,
        "stops": stops,
        "live": conn,
        "loaded": loaded,
        "kids": [k.id for k in kids],
        "events": events,
        "present": loader._tools.present_call,
    }


async def test_a_client_advertising_everything_live_and_replayed(tmp_path: Any) -> None:
    run = await run_script(tmp_path, EVERYTHING)
    sid, live, loaded = run["sid"], run["live"], run["loaded"]
    assert run["stops"] == ["end_turn"] * 4
    parent = live.of(sid, prompts=False)
    kinds = [u["sessionUpdate"] for u in parent]
    assert "plan" not in kinds and "plan_update" in kinds and "plan_removed" in kinds
    assert {u["planId"] for u in parent if u["sessionUpdate"] == "plan_removed"} == {"main"}

    # compactions: turn 2's fail at each step (the prompt they summarise says nosummary),
    # turn 3's first completes (then only the summary is older than the turn: none more)
    compactions = [u for u in parent if u["sessionUpdate"].startswith("compaction")]
    ids = list(dict.fromkeys(u["compactionId"] for u in compactions))
    shapes = []
    for cid in ids:
        mine = [u for u in compactions if u["compactionId"] == cid]
        shapes.append([u.get("status", u["sessionUpdate"]) for u in mine])
        if mine[-1]["status"] == "failed":
            assert "summary" in mine[-1]["error"]
        else:
            assert mine[1]["content"]["text"].startswith("summary: ")
    failed, done = (
        ["in_progress", "failed"],
        ["in_progress", "compaction_summary_chunk", "completed"],
    )
    assert shapes[0] == failed and done in shapes
    assert all(shape in (failed, done) for shape in shapes), shapes

    # subagents: announced running, the child's traffic on its id, then idle
    subs = [u for u in parent if u["sessionUpdate"] == "subagent_update"]
    kids = run["kids"]
    assert len(kids) == 2 and sorted({u["sessionId"] for u in subs}) == sorted(kids)
    assert [u["state"]["state"] for u in subs] == ["running", "idle", "running", "idle"]
    assert subs[0]["title"] == "child: tests"
    assert subs[1]["state"]["stopReason"] == "end_turn"
    assert subs[3]["state"]["stopReason"] == "error"
    order = [(s, u) for s, u in live.sent]
    for announce in (subs[0], subs[2]):
        child = announce["sessionId"]
        at = [i for i, (s, u) in enumerate(order) if s == child]
        running = next(i for i, (s, u) in enumerate(order) if u is announce)
        idle = next(
            i
            for i, (s, u) in enumerate(order)
            if u.get("sessionId") == child and u.get("state", {}).get("state") == "idle"
        )
        assert at and running < min(at) and max(at) < idle
    good = subs[0]["sessionId"]
    child_kinds = [u["sessionUpdate"] for u in live.of(good)]
    assert child_kinds[0] == "user_message_chunk" and "plan_update" in child_kinds
    child_plans = [u["plan"] for u in live.of(good) if u["sessionUpdate"] == "plan_update"]
    assert child_plans[-1]["entries"][0]["status"] == "completed"
    parent_plans = [u["plan"] for u in parent if u["sessionUpdate"] == "plan_update"]
    assert {p["entries"][0]["content"] for p in child_plans} == {"delegate tests"}
    assert {p["entries"][0]["content"] for p in parent_plans} == {
        "outline",
        "wait for tests",
        "wait for lint",
    }

    # replay equals live: the parent (but the prompts, which a client shows itself) and each
    # child (which a client never prompted: its task is shown)
    assert loaded.of(sid, prompts=False) == parent
    for kid in kids:
        assert loaded.of(kid) == live.of(kid)
    # the stored log names the children on the calls
    named = [e.data.get("subagentSessionId") for e in run["events"] if e.type == "tool/call"]
    assert sorted(n for n in named if n) == sorted(kids)


async def test_a_client_advertising_nothing_gets_the_legacy_stream(tmp_path: Any) -> None:
    run = await run_script(tmp_path, None)
    sid, live, loaded = run["sid"], run["live"], run["loaded"]
    assert {s for s, _ in live.sent} == {sid}  # nothing on the children's ids
    parent = live.of(sid, prompts=False)
    assert not NEW_KINDS & {u["sessionUpdate"] for u in parent}
    legacy = [
        update_to_wire(u)
        for u in replay_updates(run["events"], present_call=run["present"])
        if u.session_update != "user_message_chunk"
    ]
    assert parent == legacy  # exactly what the legacy mapping gives
    assert {"sessionUpdate": "plan", "entries": []} in parent  # an emptied list
    assert loaded.of(sid, prompts=False) == parent
    results = [u for u in parent if u["sessionUpdate"] == "tool_call_update"]
    assert any("child finished: delegate tests" in str(u.get("content")) for u in results)


async def make(tmp_path: Any, capabilities: Any = None) -> tuple[Any, FakeConn, Any]:
    service = SessionService(SessionStore(f"sqlite:///{tmp_path}/c.db"), strict=True)
    return await connect(service, capabilities)


async def test_config_options_switch_the_model_and_are_recorded(tmp_path: Any) -> None:
    agent, conn, _ = await make(tmp_path)
    new = await agent.new_session(cwd=str(tmp_path))
    sid = new.session_id
    option = _sdk.wire_dump(new)["configOptions"][0]
    assert option["id"] == "model" and option["category"] == "model"
    assert option["currentValue"] == "alpha"
    assert [o["value"] for o in option["options"]] == ["alpha", "beta"]
    await agent.prompt(session_id=sid, prompt=[Text("hi")])
    with pytest.raises(_sdk.RequestError) as bad:
        await agent.set_config_option(config_id="model", session_id=sid, value="gamma")
    assert bad.value.code == -32602
    with pytest.raises(_sdk.RequestError) as unknown:
        await agent.set_config_option(config_id="mode", session_id=sid, value="beta")
    assert unknown.value.code == -32602
    await agent.service.flush(sid)
    before = (await agent.service.store.summary(sid)).next_seq
    assert before == (await agent.service.store.summary(sid)).next_seq  # nothing written
    switched = await agent.set_config_option(config_id="model", session_id=sid, value="beta")
    assert _sdk.wire_dump(switched)["configOptions"][0]["currentValue"] == "beta"
    await agent.prompt(session_id=sid, prompt=[Text("again")])
    texts = [
        u["content"]["text"] for _, u in conn.sent if u["sessionUpdate"] == "agent_message_chunk"
    ]
    assert texts[0].startswith("[alpha]") and texts[-1].startswith("[beta]")
    await agent.service.flush(sid)
    events = list((await agent.service.store.read(sid)).events)
    metas = [e for e in events if e.type == "session/meta"]
    assert [m.data for m in metas] == [{"metadata": {"acpModel": "beta"}}]
    service = agent.service
    await agent.aclose()
    await service.aclose()

    service = SessionService(SessionStore(f"sqlite:///{tmp_path}/c.db"), strict=True)
    other, _, _ = await connect(service, None)
    loaded = await other.load_session(cwd=str(tmp_path), session_id=sid)
    assert _sdk.wire_dump(loaded)["configOptions"][0]["currentValue"] == "beta"
    resumed = await other.resume_session(cwd=str(tmp_path), session_id=sid)
    assert _sdk.wire_dump(resumed)["configOptions"][0]["currentValue"] == "beta"
    await other.aclose()
    await service.aclose()


async def test_auth_methods_name_the_key_variable(tmp_path: Any, monkeypatch: Any) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    agent, _, init = await make(tmp_path)
    methods = _sdk.wire_dump(init)["authMethods"]
    assert methods == [
        {
            "id": f"env:{KEY_ENV}",
            "name": f"API key from {KEY_ENV}",
            "description": f"Set {KEY_ENV} in the environment the agent is started with.",
        }
    ]
    with pytest.raises(_sdk.RequestError) as missing:
        await agent.authenticate(method_id=f"env:{KEY_ENV}")
    assert missing.value.code == -32000 and KEY_ENV in str(missing.value.data)
    with pytest.raises(_sdk.RequestError) as unknown:
        await agent.authenticate(method_id="oauth")
    assert unknown.value.code == -32602
    monkeypatch.setenv(KEY_ENV, "k")
    await agent.authenticate(method_id=f"env:{KEY_ENV}")
    await agent.service.aclose()


async def test_the_builtin_agent_offers_no_auth_method(tmp_path: Any) -> None:
    from todo_sessions.acp.agent import TodoSessionsAgent

    service = SessionService(SessionStore(f"sqlite:///{tmp_path}/b.db"))
    agent = TodoSessionsAgent(service)
    init = await agent.initialize(protocol_version=1)
    assert "authMethods" not in _sdk.wire_dump(init) or not _sdk.wire_dump(init)["authMethods"]
    new = await agent.new_session(cwd=str(tmp_path))
    assert [o.current_value for o in new.config_options] == ["default"]
    await service.aclose()


async def test_cancel_request_of_a_prompt_answers_cancelled(tmp_path: Any) -> None:
    agent, conn, _ = await make(tmp_path)
    sid = (await agent.new_session(cwd=str(tmp_path))).session_id
    running = asyncio.create_task(agent.prompt(session_id=sid, prompt=[Text("slow")]))
    await asyncio.wait_for(conn.streaming.wait(), 5)
    await agent.cancel_prompt_request(sid)
    assert (await asyncio.wait_for(running, 10)).stop_reason == "cancelled"
    # the next prompt is not cancelled by the old request
    assert (await agent.prompt(session_id=sid, prompt=[Text("hi")])).stop_reason == "end_turn"
    # cancelled before it started running: the turn starts (its prompt logged), then aborts
    waiting = asyncio.create_task(agent.prompt(session_id=sid, prompt=[Text("slow")]))
    await agent.cancel_prompt_request(sid)
    assert (await asyncio.wait_for(waiting, 10)).stop_reason == "cancelled"
    await agent.service.flush(sid)
    ends = [e for e in (await agent.service.store.read(sid)).events if e.type == "turn/end"]
    assert [e.data["reason"]["kind"] for e in ends] == ["aborted", "completed", "aborted"]
    await agent.service.aclose()


async def test_list_leaves_subagent_children_out_unless_asked(tmp_path: Any) -> None:
    agent, _, _ = await make(tmp_path)
    sid = (await agent.new_session(cwd=str(tmp_path))).session_id
    await agent.prompt(session_id=sid, prompt=[Text("delegate docs")])
    fork = (await agent.fork_session(cwd=str(tmp_path), session_id=sid)).session_id
    listed = [s.session_id for s in (await agent.list_sessions()).sessions]
    assert sorted(listed) == sorted([sid, fork])  # a fork is listed, the child is not
    every = [s.session_id for s in (await agent.list_sessions(includeSubagents=True)).sessions]
    kids = [k.id for k in await agent.service.store.list(parent=sid) if k.id != fork]
    assert len(kids) == 1 and sorted(every) == sorted([sid, fork, *kids])
    await agent.service.aclose()


async def test_a_manual_compaction_is_replayed_at_its_place(tmp_path: Any) -> None:
    agent, _, _ = await make(tmp_path)
    sid = (await agent.new_session(cwd=str(tmp_path))).session_id
    await agent.prompt(session_id=sid, prompt=[Text("first")])
    await agent.prompt(session_id=sid, prompt=[Text("second")])
    agent.service.get(sid).compact("what happened so far")
    await agent.service.flush(sid)
    conn = FakeConn()
    agent.on_connect(conn)
    agent.client_capabilities_json = EVERYTHING
    await agent.initialize(protocol_version=1)
    await agent.load_session(cwd=str(tmp_path), session_id=sid)
    kinds = [u["sessionUpdate"] for u in conn.of(sid)]
    assert kinds[-3:] == ["compaction_update", "compaction_summary_chunk", "compaction_update"]
    chunk = conn.of(sid)[-2]
    assert chunk["content"] == {"type": "text", "text": "what happened so far"}
    legacy = FakeConn()
    agent.on_connect(legacy)
    agent.client_capabilities_json = {}
    await agent.initialize(protocol_version=1)
    await agent.load_session(cwd=str(tmp_path), session_id=sid)
    assert not NEW_KINDS & {u["sessionUpdate"] for u in legacy.of(sid)}
    assert legacy.of(sid)[-1]["sessionUpdate"] == "user_message_chunk"  # the summary message
    await agent.aclose()
    await agent.service.aclose()


async def test_the_harness_subagent_tool_for_a_subagents_client(tmp_path: Any) -> None:
    """The harness's own ``subagent`` tool (when this tree has it) through the bridge, for a
    client that advertises everything: announced, relayed on the child's id, replayed."""
    subagent = pytest.importorskip("todo_sessions.harness.subagent")
    from todo_sessions.acp.agent import TodoSessionsAgent
    from todo_sessions.harness import ScriptedModel, ScriptedResponse
    from todo_sessions.harness.tools.registry import ToolRegistry
    from todo_sessions.harness.tools.todo_write import TodoWriteTool

    parent_plan = {"todos": [{"content": "delegate", "status": "in_progress"}]}
    child_plan = {"todos": [{"content": "count the tests", "status": "in_progress"}]}
    model = ScriptedModel(  # one model: the parent's calls and the child's, in order
        [
            ScriptedResponse(
                tool_calls=[("todo_write", parent_plan), ("subagent", {"task": "count"})]
            ),
            ScriptedResponse(tool_calls=[("todo_write", child_plan)]),
            ScriptedResponse(text="12 tests."),
            ScriptedResponse(text="The child counted 12 tests."),
        ]
    )
    url = f"sqlite:///{tmp_path}/h.db"

    async def build(service: SessionService) -> tuple[TodoSessionsAgent, FakeConn]:
        def tools() -> ToolRegistry:
            registry = ToolRegistry()
            registry.register(TodoWriteTool())
            registry.register(subagent.SubagentTool(service))
            return registry

        agent = TodoSessionsAgent(service, model_factory=lambda: model, tools_factory=tools)
        conn = FakeConn()
        agent.on_connect(conn)
        agent.client_capabilities_json = EVERYTHING
        await agent.initialize(protocol_version=1)
        return agent, conn

    service = SessionService(SessionStore(url), strict=True)
    agent, conn = await build(service)
    sid = (await agent.new_session(cwd=str(tmp_path))).session_id
    assert (await agent.prompt(session_id=sid, prompt=[Text("go")])).stop_reason == "end_turn"
    subs = [u for u in conn.of(sid) if u["sessionUpdate"] == "subagent_update"]
    assert [u["state"]["state"] for u in subs] == ["running", "idle"]
    child = subs[0]["sessionId"]
    assert subs[1]["state"]["stopReason"] == "end_turn"
    plans = [u["plan"]["entries"] for u in conn.of(child) if u["sessionUpdate"] == "plan_update"]
    assert [[e["content"] for e in entries] for entries in plans] == [["count the tests"]]
    live_parent, live_child = conn.of(sid, prompts=False), conn.of(child)
    await agent.aclose()
    await service.aclose()

    service = SessionService(SessionStore(url), strict=True)
    loader, loaded = await build(service)
    await loader.load_session(cwd=str(tmp_path), session_id=sid)
    await loader.load_session(cwd=str(tmp_path), session_id=child)
    assert loaded.of(sid, prompts=False) == live_parent
    assert loaded.of(child) == live_child
    await loader.aclose()
    await service.aclose()


async def test_a_subagent_call_that_made_no_child_is_not_announced(tmp_path: Any) -> None:
    """The call names a child the tool then refuses to make (a session of that id, not a
    child of this one, exists): neither live nor replayed is it announced, nor relayed."""
    subagent = pytest.importorskip("todo_sessions.harness.subagent")
    from todo_sessions.acp.agent import TodoSessionsAgent
    from todo_sessions.harness import ScriptedModel, ScriptedResponse
    from todo_sessions.harness.tools.registry import ToolRegistry

    model = ScriptedModel(
        [
            ScriptedResponse(tool_calls=[("subagent", {"task": "count"})]),
            ScriptedResponse(text="It could not."),
        ]
    )
    url = f"sqlite:///{tmp_path}/r.db"

    async def build(service: SessionService) -> tuple[TodoSessionsAgent, FakeConn]:
        def tools() -> ToolRegistry:
            registry = ToolRegistry()
            registry.register(subagent.SubagentTool(service))
            return registry

        agent = TodoSessionsAgent(service, model_factory=lambda: model, tools_factory=tools)
        conn = FakeConn()
        agent.on_connect(conn)
        agent.client_capabilities_json = EVERYTHING
        await agent.initialize(protocol_version=1)
        return agent, conn

    service = SessionService(SessionStore(url), strict=True)
    agent, conn = await build(service)
    sid = (await agent.new_session(cwd=str(tmp_path))).session_id
    squatter = subagent.subagent_session_id(sid, "call_1_1")
    await service.new(squatter, cwd=str(tmp_path))
    service.get(squatter).append("session/meta", {"metadata": {"note": "not a child"}})
    await service.close(squatter)
    assert (await agent.prompt(session_id=sid, prompt=[Text("go")])).stop_reason == "end_turn"
    live = conn.of(sid, prompts=False)
    assert not [u for u in live if u["sessionUpdate"] == "subagent_update"]
    assert conn.of(squatter) == []  # not relayed
    (result,) = [u for u in live if u["sessionUpdate"] == "tool_call_update"]
    assert result["status"] == "failed" and "exists already" in str(result["content"])
    await agent.aclose()
    await service.aclose()

    service = SessionService(SessionStore(url), strict=True)
    loader, loaded = await build(service)
    await loader.load_session(cwd=str(tmp_path), session_id=sid)
    assert loaded.of(sid, prompts=False) == live
    await loader.aclose()
    await service.aclose()


async def test_session_cancel_of_the_parent_cancels_its_running_child(tmp_path: Any) -> None:
    """``session/cancel`` of a prompt whose ``subagent`` call is running: the child's turn
    ends aborted, the parent's call is answered cancelled, both logs are well formed, and
    the client is told the child went idle, cancelled."""
    subagent = pytest.importorskip("todo_sessions.harness.subagent")
    from todo_sessions.acp.agent import TodoSessionsAgent
    from todo_sessions.core.structure import check_structure
    from todo_sessions.harness import ScriptedModel, ScriptedResponse
    from todo_sessions.harness.tools.registry import ToolRegistry

    model = ScriptedModel(
        [
            ScriptedResponse(tool_calls=[("subagent", {"task": "count"})]),
            ScriptedResponse(text="counting " * 200, delay=0.05),  # the child: slow
        ]
    )
    service = SessionService(SessionStore(f"sqlite:///{tmp_path}/x.db"), strict=True)

    def tools() -> ToolRegistry:
        registry = ToolRegistry()
        registry.register(subagent.SubagentTool(service))
        return registry

    agent = TodoSessionsAgent(service, model_factory=lambda: model, tools_factory=tools)
    conn = FakeConn()
    agent.on_connect(conn)
    agent.client_capabilities_json = EVERYTHING
    await agent.initialize(protocol_version=1)
    sid = (await agent.new_session(cwd=str(tmp_path))).session_id
    running = asyncio.create_task(agent.prompt(session_id=sid, prompt=[Text("go")]))
    child = subagent.subagent_session_id(sid, "call_1_1")
    for _ in range(500):
        if any(u["sessionUpdate"] == "agent_message_chunk" for u in conn.of(child)):
            break
        await asyncio.sleep(0.01)
    await agent.cancel(session_id=sid)
    assert (await asyncio.wait_for(running, 20)).stop_reason == "cancelled"
    await service.flush()
    parent_log = (await service.store.read(sid)).events
    child_log = (await service.store.read(child)).events
    check_structure(parent_log)
    check_structure(child_log)
    assert parent_log[-1].data["reason"]["kind"] == "aborted"
    assert child_log[-1].data["reason"]["kind"] == "aborted"
    assert [c.status for c in await service.store.children(sid)] == ["aborted"]
    subs = [u for u in conn.of(sid) if u["sessionUpdate"] == "subagent_update"]
    assert [u["state"] for u in subs] == [
        {"state": "running"},
        {"state": "idle", "stopReason": "cancelled"},
    ]
    await agent.aclose()
    await service.aclose()


async def test_a_subagent_call_that_asks_permission_does_not_stall(tmp_path: Any) -> None:
    """A ``subagent`` tool that needs the user's permission: the stream held for its
    announcement is let go while the client is asked, so the call runs and is announced."""
    subagent = pytest.importorskip("todo_sessions.harness.subagent")
    from todo_sessions.acp.agent import TodoSessionsAgent
    from todo_sessions.harness import ScriptedModel, ScriptedResponse
    from todo_sessions.harness.tools.registry import ToolRegistry

    model = ScriptedModel(
        [
            ScriptedResponse(tool_calls=[("subagent", {"task": "count"})]),
            ScriptedResponse(text="12."),
            ScriptedResponse(text="Counted."),
        ]
    )
    service = SessionService(SessionStore(f"sqlite:///{tmp_path}/p.db"), strict=True)

    class Asked(FakeConn):
        async def request_permission(self, **_: Any) -> Any:
            from acp.schema import AllowedOutcome

            return _sdk.RequestPermissionResponse(
                outcome=AllowedOutcome(outcome="selected", option_id="allow-once")
            )

    def tools() -> ToolRegistry:
        tool = subagent.SubagentTool(service)
        tool.requires_permission = True  # type: ignore[attr-defined]
        registry = ToolRegistry()
        registry.register(tool)
        return registry

    agent = TodoSessionsAgent(service, model_factory=lambda: model, tools_factory=tools)
    conn = Asked()
    agent.on_connect(conn)
    agent.client_capabilities_json = EVERYTHING
    await agent.initialize(protocol_version=1)
    sid = (await agent.new_session(cwd=str(tmp_path))).session_id
    done = await asyncio.wait_for(agent.prompt(session_id=sid, prompt=[Text("go")]), 20)
    assert done.stop_reason == "end_turn"
    subs = [u["state"]["state"] for u in conn.of(sid) if u["sessionUpdate"] == "subagent_update"]
    assert subs == ["running", "idle"]
    await agent.aclose()
    await service.aclose()


async def arrived(check: Any, what: str) -> None:
    """Wait until ``check()`` holds (what is waited for arrives in the background)."""
    for _ in range(3000):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never arrived: {what}")


def compactions(updates: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [
        (u["sessionUpdate"], u.get("status", "chunk"))
        for u in updates
        if u["sessionUpdate"].startswith("compaction")
    ]


@pytest.mark.parametrize("capabilities", [EVERYTHING, {}], ids=["compaction", "legacy"])
async def test_a_compaction_by_the_host_between_prompts_is_sent_live(
    tmp_path: Any, capabilities: dict[str, Any]
) -> None:
    """The program embedding the agent compacts a session its client has open, between
    prompts: the client is sent it as it lands (once stored), and one stored only when the
    next prompt starts is sent before that prompt's own updates. A fresh client's replay is
    the same stream (order, ids, content); a legacy client gets the summary message, as its
    replay has it."""
    url = f"sqlite:///{tmp_path}/h.db"
    service = SessionService(SessionStore(url), strict=True, flush_interval=None)
    agent = make_agent(service, compaction=None, follow_interval=0.01)
    conn = FakeConn()
    agent.on_connect(conn)
    agent.client_capabilities_json = capabilities
    await agent.initialize(protocol_version=1)
    sid = (await agent.new_session(cwd=str(tmp_path))).session_id
    for text in ("first", "second"):
        await agent.prompt(session_id=sid, prompt=[Text(text)])
    agent.service.get(sid).compact("what happened so far")  # the host, between prompts
    await service.flush(sid)  # stored: the follower sees it
    if capabilities:
        done = ("compaction_update", "completed")
        await arrived(lambda: done in compactions(conn.of(sid)), "the compaction")
        assert compactions(conn.of(sid)) == [
            ("compaction_update", "in_progress"),
            ("compaction_summary_chunk", "chunk"),
            ("compaction_update", "completed"),
        ]
    else:
        summary = {"type": "text", "text": "what happened so far"}

        def chunks() -> list[Any]:
            return [
                u["content"] for u in conn.of(sid) if u["sessionUpdate"] == "user_message_chunk"
            ]

        await arrived(lambda: summary in chunks(), "the summary message")
        assert not NEW_KINDS & {u["sessionUpdate"] for u in conn.of(sid)}
    shown = len(conn.of(sid))
    agent.service.get(sid).compact("and then some more")  # not stored before the prompt
    await agent.prompt(session_id=sid, prompt=[Text("third")])
    third = conn.of(sid)[shown:]
    answer = next(i for i, u in enumerate(third) if u["sessionUpdate"] == "agent_message_chunk")
    if capabilities:  # the second compaction, whole, before the prompt's answer
        assert len(compactions(third[:answer])) == 3 == len(compactions(third))
    else:
        assert third[0]["content"] == {"type": "text", "text": "and then some more"}
    live = conn.of(sid, prompts=False)
    await agent.aclose()
    await service.aclose()

    service = SessionService(SessionStore(url), strict=True)
    loader, loaded, _ = await connect(service, capabilities)
    await loader.load_session(cwd=str(tmp_path), session_id=sid)
    assert loaded.of(sid, prompts=False) == live
    if capabilities:
        ids = list(dict.fromkeys(u["compactionId"] for u in live if "compactionId" in u))
        assert len(ids) == 2
    await loader.aclose()
    await service.aclose()


async def test_a_compaction_by_another_process_is_sent_live(
    tmp_path: Any, shared_db_url: str
) -> None:
    """A session the client loaded (not live in this agent) is compacted by another process
    on the same store (SQLite: the follower polls; PostgreSQL: it is notified): the client is
    sent the compaction as it lands; prompting the session afterwards goes on from there; a
    fresh client's replay is what the first one was sent."""
    url = shared_db_url
    service = SessionService(SessionStore(url), strict=True)
    agent = make_agent(service, compaction=None, follow_interval=0.01)
    conn = FakeConn()
    agent.on_connect(conn)
    agent.client_capabilities_json = EVERYTHING
    await agent.initialize(protocol_version=1)
    sid = (await agent.new_session(cwd=str(tmp_path))).session_id
    for text in ("first", "second"):
        await agent.prompt(session_id=sid, prompt=[Text(text)])
    await agent.close_session(session_id=sid)
    mark = len(conn.of(sid))
    await agent.load_session(cwd=str(tmp_path), session_id=sid)
    elsewhere = SessionService(SessionStore(url), strict=True)  # another process's
    session = await elsewhere.resume(sid)
    session.compact("summarised elsewhere")
    await elsewhere.aclose()
    done = ("compaction_update", "completed")
    await arrived(lambda: done in compactions(conn.of(sid)[mark:]), "the compaction")
    assert agent.service.live_ids() == []  # only followed
    assert (await agent.prompt(session_id=sid, prompt=[Text("third")])).stop_reason == "end_turn"
    seen = [u for u in conn.of(sid, prompts=False)[mark:]]
    await agent.aclose()
    await service.aclose()

    service = SessionService(SessionStore(url), strict=True)
    loader, loaded, _ = await connect(service, EVERYTHING)
    await loader.load_session(cwd=str(tmp_path), session_id=sid)
    replay = loaded.of(sid, prompts=False)
    assert replay == seen
    (chunk,) = [u for u in replay if u["sessionUpdate"] == "compaction_summary_chunk"]
    assert chunk["content"] == {"type": "text", "text": "summarised elsewhere"}
    await loader.aclose()
    await service.aclose()


async def test_a_turn_another_process_runs_is_sent_live_with_its_child(tmp_path: Any) -> None:
    """A session the client loaded is prompted by another process whose turn delegates to a
    subagent: the client is sent the turn as it lands, the child announced, its traffic on
    its own id, then idle; a fresh client's replay of the parent and of the child is what it
    was sent."""
    from scripted_agent import Director, SubagentTool

    from todo_sessions.harness.loop import AgentLoop
    from todo_sessions.harness.tools.registry import ToolRegistry
    from todo_sessions.harness.tools.todo_write import TodoWriteTool

    url = f"sqlite:///{tmp_path}/t.db"
    service = SessionService(SessionStore(url), strict=True)
    agent = make_agent(service, compaction=None, follow_interval=0.01)
    conn = FakeConn()
    agent.on_connect(conn)
    agent.client_capabilities_json = EVERYTHING
    await agent.initialize(protocol_version=1)
    sid = (await agent.new_session(cwd=str(tmp_path))).session_id
    await agent.prompt(session_id=sid, prompt=[Text("first")])
    await agent.close_session(session_id=sid)
    mark = len(conn.sent)
    await agent.load_session(cwd=str(tmp_path), session_id=sid)
    elsewhere = SessionService(SessionStore(url), strict=True)  # another process's
    tools = ToolRegistry()
    tools.register(TodoWriteTool())
    tools.register(SubagentTool(elsewhere))
    session = await elsewhere.resume(sid)
    loop = AgentLoop(session, Director("alpha"), tools)
    assert (await loop.run_turn("delegate tests")).reason == "completed"
    await elsewhere.aclose()

    def subs() -> list[dict[str, Any]]:
        return [u for s, u in conn.sent[mark:] if u["sessionUpdate"] == "subagent_update"]

    await arrived(lambda: len(subs()) == 2, "the child's announcements")
    (child,) = {u["sessionId"] for u in subs()}
    assert [u["state"] for u in subs()] == [
        {"state": "running"},
        {"state": "idle", "stopReason": "end_turn"},
    ]
    at = [i for i, (s, u) in enumerate(conn.sent) if s == child]
    marks = [i for i, (_, u) in enumerate(conn.sent) if u.get("sessionId") == child]
    assert at and marks[0] < min(at) and max(at) < marks[1]  # announced, traffic, idle
    seen = conn.of(sid)[len([u for s, u in conn.sent[:mark] if s == sid]) :]
    seen_child = conn.of(child)
    await agent.aclose()
    await service.aclose()

    service = SessionService(SessionStore(url), strict=True)
    loader, loaded, _ = await connect(service, EVERYTHING)
    await loader.load_session(cwd=str(tmp_path), session_id=sid)
    await loader.load_session(cwd=str(tmp_path), session_id=child)
    assert loaded.of(sid) == seen
    assert loaded.of(child) == seen_child
    await loader.aclose()
    await service.aclose()


async def test_a_child_loaded_while_it_runs_is_sent_once(tmp_path: Any) -> None:
    """The client loads a child session while the parent's prompt relays it: the load's
    replay, then the child's updates from there on, each once (what a fresh replay of the
    child sends), not again by the relay nor by the child's follower."""
    subagent = pytest.importorskip("todo_sessions.harness.subagent")
    from todo_sessions.acp.agent import TodoSessionsAgent
    from todo_sessions.harness import ScriptedModel, ScriptedResponse
    from todo_sessions.harness.tools.registry import ToolRegistry

    model = ScriptedModel(
        [
            ScriptedResponse(tool_calls=[("subagent", {"task": "count"})]),
            ScriptedResponse(text="counting " * 60, delay=0.01),  # the child: slow
            ScriptedResponse(text="Counted."),
        ]
    )
    url = f"sqlite:///{tmp_path}/l.db"
    service = SessionService(SessionStore(url), strict=True)

    def tools() -> ToolRegistry:
        registry = ToolRegistry()
        registry.register(subagent.SubagentTool(service))
        return registry

    agent = TodoSessionsAgent(
        service, model_factory=lambda: model, tools_factory=tools, follow_interval=0.01
    )
    conn = FakeConn()
    agent.on_connect(conn)
    agent.client_capabilities_json = EVERYTHING
    await agent.initialize(protocol_version=1)
    sid = (await agent.new_session(cwd=str(tmp_path))).session_id
    running = asyncio.create_task(agent.prompt(session_id=sid, prompt=[Text("go")]))
    child = subagent.subagent_session_id(sid, "call_1_1")
    await arrived(
        lambda: any(u["sessionUpdate"] == "agent_message_chunk" for u in conn.of(child)),
        "the child's first words",
    )
    mark = len(conn.of(child))
    await agent.load_session(cwd=str(tmp_path), session_id=child)
    assert (await running).stop_reason == "end_turn"
    await asyncio.sleep(0.1)  # a follower's look at the child: nothing more to send
    after = conn.of(child)[mark:]  # the relay may send more before the replay starts
    replayed = [i for i, u in enumerate(after) if u["sessionUpdate"] == "user_message_chunk"]
    seen = after[replayed[0] :]  # the replay (it starts with the child's task), then live
    await agent.aclose()
    await service.aclose()

    service = SessionService(SessionStore(url), strict=True)
    loader, loaded, _ = await connect(service, EVERYTHING)
    await loader.load_session(cwd=str(tmp_path), session_id=child)
    assert seen == loaded.of(child)
    await loader.aclose()
    await service.aclose()
