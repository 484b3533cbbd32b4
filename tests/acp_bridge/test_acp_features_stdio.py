"""The newer ACP updates end to end over stdio, from the official SDKs as clients.

The agent is `scripted_agent` (the real bridge and loop, scripted models, a subagent tool,
automatic compaction) in its own process. ``tests/acp_ts/features.mjs`` drives it with the
TypeScript SDK 2.4.0 and validates every message the agent sends against the SDK's zod
schemas (stable where the type is stable, unstable otherwise), as a client that advertises
everything and as one that advertises nothing, live and after ``session/load``. The Python
SDK (``agent-client-protocol``, schema 1.19) drives the types its schema knows: plan
operations, config options, auth methods and ``$/cancel_request``.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import acp
import pytest
from acp.connection import StreamEvent
from acp.schema import CancelRequestNotification, SessionNotification
from scripted_agent import KEY_ENV, make_agent

from todo_sessions import SessionService, SessionStore
from todo_sessions.acp.mapping import replay_updates, update_to_wire

HERE = Path(__file__).parent
CLIENT = HERE.parent / "acp_ts"
SDK = CLIENT / "node_modules" / "@agentclientprotocol" / "sdk"
AGENT = HERE / "scripted_agent.py"
LIFECYCLE = ("session_info_update", "usage_update")
NEW_KINDS = {
    "compaction_update",
    "compaction_summary_chunk",
    "plan_update",
    "plan_removed",
    "subagent_update",
}

pytestmark = pytest.mark.slow

needs_node = pytest.mark.skipif(
    shutil.which("node") is None or not SDK.exists(),
    reason="needs node and the TypeScript SDK: npm install --prefix tests/acp_ts (.ci/run does)",
)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != KEY_ENV}
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), *sys.path])
    return env


async def ts_run(tmp_path: Path, mode: str) -> tuple[dict[str, Any], str]:
    url = f"sqlite:///{tmp_path}/{mode}.db"
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    node = await asyncio.create_subprocess_exec(
        "node", str(CLIENT / "features.mjs"), sys.executable, str(AGENT), url, str(project), mode,
        stdout=asyncio.subprocess.PIPE, env=_env(),
    )  # fmt: skip
    out, _ = await asyncio.wait_for(node.communicate(), 180)
    assert node.returncode == 0, out.decode(errors="replace")
    return json.loads(out.decode().strip().splitlines()[-1]), url


def of(updates: list[dict[str, Any]], session_id: str, *, prompts: bool = True) -> list[Any]:
    """The updates of one session, without the lifecycle ones (and the prompts' echo)."""
    return [
        u["update"]
        for u in updates
        if u["sessionId"] == session_id
        and u["update"]["sessionUpdate"] not in LIFECYCLE
        and (prompts or u["update"]["sessionUpdate"] != "user_message_chunk")
    ]


def check_common(report: dict[str, Any]) -> None:
    assert report["agentExit"] == 0
    assert report["errors"] == []
    assert report["authMethods"] == [
        {
            "id": f"env:{KEY_ENV}",
            "name": f"API key from {KEY_ENV}",
            "description": f"Set {KEY_ENV} in the environment the agent is started with.",
        }
    ]
    assert report["authError"]["code"] == -32000
    assert report["authError"]["data"]["variable"] == KEY_ENV
    option = report["newOptions"][0]
    assert (option["id"], option["category"], option["type"]) == ("model", "model", "select")
    assert option["currentValue"] == "alpha"
    assert [o["value"] for o in option["options"]] == ["alpha", "beta"]
    assert report["switched"][0]["currentValue"] == "beta"
    assert report["loadOptions"][0]["currentValue"] == "beta"
    assert report["badConfig"]["code"] == -32602
    assert report["stops"] == ["end_turn"] * 4
    assert report["cancelled"] == "cancelled"
    sid = report["sessionId"]
    texts = [
        u["update"]["content"]["text"]
        for u in report["live"]
        if u["sessionId"] == sid and u["update"]["sessionUpdate"] == "agent_message_chunk"
    ]
    assert texts[0].startswith("[alpha]") and texts[-1].startswith("[beta]")
    assert report["listed"] == [sid]  # the subagent children are left out ...
    assert len(report["listedAll"]) == 3 and sid in report["listedAll"]  # ... unless asked


@needs_node
async def test_typescript_client_advertising_everything(tmp_path: Path) -> None:
    report, _ = await ts_run(tmp_path, "everything")
    check_common(report)
    sid, live, replayed = report["sessionId"], report["live"], report["replayed"]
    checked = report["checked"]
    for kind in ("plan_update", "plan_removed", "subagent_update"):
        assert checked.get(f"unstable:{kind}", 0) > 0, kind
    for kind in ("compaction_update", "compaction_summary_chunk", "tool_call"):
        assert checked.get(f"stable:{kind}", 0) > 0, kind
    parent = of(live, sid, prompts=False)
    kinds = {u["sessionUpdate"] for u in parent}
    assert kinds >= NEW_KINDS and "plan" not in kinds

    children = list(dict.fromkeys(u["sessionId"] for u in parent if "state" in u))
    assert len(children) == 2 and set(children) < set(report["listedAll"])
    for child in children:  # announced, then its traffic on its own id, then idle
        at = [i for i, u in enumerate(live) if u["sessionId"] == child]
        marks = [
            (i, u["update"]["state"]["state"])
            for i, u in enumerate(live)
            if u["update"].get("sessionId") == child
        ]
        assert [state for _, state in marks] == ["running", "idle"]
        assert at and marks[0][0] < min(at) and max(at) < marks[1][0]
        child_kinds = [u["update"]["sessionUpdate"] for u in live if u["sessionId"] == child]
        assert child_kinds[0] == "user_message_chunk"  # its task
    good = [u["update"]["sessionUpdate"] for u in live if u["sessionId"] == children[0]]
    assert "plan_update" in good and "plan" not in good  # its own plan, on its own id
    idle = [u["state"] for u in parent if u.get("state", {}).get("state") == "idle"]
    assert [state["stopReason"] for state in idle] == ["end_turn", "error"]

    # after session/load: the parent's replay is the live stream (the prompts aside, and the
    # cancelled turn after it), each child's replay its live stream
    replay_parent = of(replayed, sid, prompts=False)
    assert replay_parent[: len(parent)] == parent
    for child in children:
        assert of(replayed, child) == of(live, child)


@needs_node
async def test_typescript_client_advertising_nothing(tmp_path: Path) -> None:
    report, url = await ts_run(tmp_path, "nothing")
    check_common(report)
    sid, live, replayed = report["sessionId"], report["live"], report["replayed"]
    assert {u["sessionId"] for u in live} == {sid}  # nothing on the children's ids
    assert not NEW_KINDS & {u["update"]["sessionUpdate"] for u in live + replayed}
    parent = of(live, sid, prompts=False)
    assert {"sessionUpdate": "plan", "entries": []} in parent  # an emptied list
    async with SessionStore(url) as store:
        events = list((await store.read(sid)).events)
        service = SessionService(store)
        present = make_agent(service)._tools.present_call
        legacy = [
            update_to_wire(u)
            for u in replay_updates(events, present_call=present)
            if u.session_update != "user_message_chunk"
        ]
    assert legacy[: len(parent)] == parent  # exactly the legacy mapping of the log
    assert of(replayed, sid, prompts=False)[: len(parent)] == parent
    assert report["checked"].get("unstable:plan_update") is None


class Recorder:
    """A Python SDK client recording the raw wire (and what its schema makes of it)."""

    def __init__(self) -> None:
        self.wire: list[dict[str, Any]] = []
        self.outgoing: list[dict[str, Any]] = []
        self.slow = asyncio.Event()
        """Set when the agent streams the slow prompt's answer."""

    def observe(self, event: StreamEvent) -> None:
        side = self.wire if event.direction.value == "incoming" else self.outgoing
        side.append(event.message)
        update = (event.message.get("params") or {}).get("update") or {}
        chunk = update.get("sessionUpdate") == "agent_message_chunk"
        if chunk and "slow" in update["content"].get("text", ""):
            self.slow.set()

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        return None

    def updates(self, session_id: str) -> list[dict[str, Any]]:
        return [
            m["params"]["update"]
            for m in self.wire
            if m.get("method") == "session/update" and m["params"]["sessionId"] == session_id
        ]


async def test_python_sdk_client_plans_config_auth_and_cancel(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/py.db"
    recorder = Recorder()
    async with acp.spawn_agent_process(
        recorder, sys.executable, str(AGENT), url, env=_env(), observers=[recorder.observe]
    ) as (conn, _proc):
        init = await conn.initialize(
            protocol_version=acp.PROTOCOL_VERSION,
            client_capabilities=acp.schema.ClientCapabilities(plan=acp.schema.PlanCapabilities()),
        )
        assert [m.id for m in init.auth_methods] == [f"env:{KEY_ENV}"]
        with pytest.raises(acp.RequestError) as refused:
            await conn.authenticate(method_id=f"env:{KEY_ENV}")
        assert refused.value.code == -32000 and KEY_ENV in json.dumps(refused.value.data)

        new = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        sid = new.session_id
        assert new.config_options[0].current_value == "alpha"
        await conn.prompt(session_id=sid, prompt=[acp.text_block("plan")])
        with pytest.raises(acp.RequestError) as bad:
            await conn.set_config_option(config_id="model", session_id=sid, value="gamma")
        assert bad.value.code == -32602
        switched = await conn.set_config_option(config_id="model", session_id=sid, value="beta")
        assert switched.config_options[0].current_value == "beta"

        # $/cancel_request of the running prompt (its id read off the wire)
        slow = asyncio.create_task(conn.prompt(session_id=sid, prompt=[acp.text_block("slow")]))
        await asyncio.wait_for(recorder.slow.wait(), 20)
        request_id = next(
            m["id"] for m in reversed(recorder.outgoing) if m.get("method") == "session/prompt"
        )
        cancel = CancelRequestNotification(request_id=request_id)
        await conn._conn.send_notification(
            "$/cancel_request", cancel.model_dump(mode="json", by_alias=True, exclude_none=True)
        )
        assert (await asyncio.wait_for(slow, 20)).stop_reason == "cancelled"

    updates = recorder.updates(sid)
    for update in updates:  # every update is one the SDK's schema knows
        SessionNotification.model_validate({"sessionId": sid, "update": update})
    kinds = [u["sessionUpdate"] for u in updates]
    assert "plan" not in kinds and "plan_update" in kinds and "plan_removed" in kinds
    assert not {"compaction_update", "subagent_update"} & set(kinds)  # not advertised


class Quiet:
    async def session_update(self, session_id: str, update: Any) -> None:
        pass


@needs_node
@pytest.mark.parametrize("mode", ["everything", "nothing"])
async def test_typescript_client_is_sent_a_compaction_made_elsewhere(
    tmp_path: Path, mode: str
) -> None:
    """The TypeScript client has a session loaded; this test's process (another process on
    the same store) compacts it: the client is sent it as it lands, before it prompts again,
    every message valid for the SDK's schemas; the client's stream from its first load on is
    what a replay sends afterwards (order, ids, content)."""
    url = f"sqlite:///{tmp_path}/elsewhere.db"
    project = tmp_path / "project"
    project.mkdir()
    service = SessionService(SessionStore(url), strict=True)
    agent = make_agent(service, compaction=None)
    agent.on_connect(Quiet())  # the session's first client, gone before the test's
    sid = (await agent.new_session(cwd=str(project))).session_id
    for text in ("first", "second"):
        await agent.prompt(session_id=sid, prompt=[acp.text_block(text)])
    await agent.aclose()
    await service.aclose()
    node = await asyncio.create_subprocess_exec(
        "node", str(CLIENT / "elsewhere.mjs"), sys.executable, str(AGENT), url, str(project),
        sid, mode, stdout=asyncio.subprocess.PIPE, env=_env(),
    )  # fmt: skip
    assert node.stdout is not None
    ready = await asyncio.wait_for(node.stdout.readline(), 180)
    assert ready.decode().strip() == "LOADED"
    elsewhere = SessionService(SessionStore(url), strict=True)
    (await elsewhere.resume(sid)).compact("summarised elsewhere")
    await elsewhere.aclose()
    out, _ = await asyncio.wait_for(node.communicate(), 180)
    assert node.returncode == 0, out.decode(errors="replace")
    report = json.loads(out.decode().strip().splitlines()[-1])
    assert report["agentExit"] == 0 and report["errors"] == []
    assert report["stop"] == "end_turn"
    landed = of(report["landed"], sid)
    summary = {"type": "text", "text": "summarised elsewhere"}
    if mode == "everything":
        assert report["checked"]["stable:compaction_summary_chunk"] > 0
        assert [(u["sessionUpdate"], u.get("status")) for u in landed] == [
            ("compaction_update", "in_progress"),
            ("compaction_summary_chunk", None),
            ("compaction_update", "completed"),
        ]
        assert landed[1]["content"] == summary
        assert len({u["compactionId"] for u in landed}) == 1
    else:
        assert landed[0] == {
            "sessionUpdate": "user_message_chunk",
            "content": summary,
            "messageId": landed[0]["messageId"],
        }
        assert not NEW_KINDS & {u["update"]["sessionUpdate"] for u in report["seen"]}
    assert of(report["replayed"], sid, prompts=False) == of(report["seen"], sid, prompts=False)
