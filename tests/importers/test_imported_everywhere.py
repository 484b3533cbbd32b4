"""Everything works on imported sessions (issue #37, item 3): Claude Code, Codex and opencode
sessions imported with ``todo-sessions import --from`` into one store (the committed corpus of
tests/fixtures/importers), then read by every command (``list --agent``, ``show``, ``todos``,
``messages --format``, ``search``, ``verify``, ``fork``, ``prune`` and ``export --format``),
the viewer, the ACP agent (``session/list`` and ``session/load``: an editor replays each agent's
session with its plan) and the project's own agent loop, which resumes an imported session and
runs a turn of it."""

from __future__ import annotations

import asyncio
import gzip
import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from todo_sessions import SessionService, SessionStore
from todo_sessions.cli import main

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "importers"
CODEX_ROOT = FIXTURES / "codex" / "sessions"
CLAUDE_ROOT = FIXTURES / "claude-code" / "projects"
CODEX = "codex-0199d0a4-7b1e-7c30-9f2a-3c4d5e6f7a8b"
CODEX_CHILD = "codex-0199d0a5-1111-7222-8333-444455556666"
CLAUDE_FILE = next(CLAUDE_ROOT.glob("*/*.jsonl"))
CODEX_FILE = next(CODEX_ROOT.rglob("rollout-*0199d0a4*.jsonl"))
CLAUDE = "claude-95d5d53db1194bcd-5f0c6d7e-1a2b-4c3d-8e9f-0a1b2c3d4e5f"
"""The store id of CLAUDE_FILE (the SDK mirror's: a hash of the project key, the session id)."""
PLAN = [("Read cli.py", "completed"), ("Add the --json flag", "completed")]
OPENCODE_CORPUS = FIXTURES / "opencode"
OPENCODE = "opencode-ses_fixmain0000000000000001"
OPENCODE_CHILD = "opencode-ses_fixchild000000000000001"
OPENCODE_PLAN = [("Reproduce the failure", "completed"), ("Fix the parser", "completed")]
AGENTS = ("codex", "claude-code", "opencode")
SAID = {"codex": "Add a --json flag", "claude-code": "Add a --json flag", "opencode": "parser.py"}
"""Text each agent's user wrote, found again in every view of its session."""
PLANS = {"codex": PLAN, "claude-code": PLAN, "opencode": OPENCODE_PLAN}
PLAN_TOOLS = {"codex": "update_plan", "claude-code": "TodoWrite", "opencode": "todowrite"}
SEARCHED = {"codex": "update_plan", "claude-code": "TodoWrite", "opencode": "empty input"}
"""A query that finds text of each agent's session (the agents' own words and tool names)."""


def cli(db: str, *args: str, code: int = 0) -> Result:
    result = CliRunner().invoke(main, ["--db", db, *args])
    assert result.exit_code == code, (args, result.output, result.stderr)
    assert "Traceback" not in result.stderr
    return result


def opencode_db(directory: Path) -> Path:
    """The opencode corpus database (opencode's tables, hand-written rows), as
    tests/importers/test_opencode.py builds it."""
    path = directory / "opencode.db"
    with sqlite3.connect(path) as db:
        db.executescript((OPENCODE_CORPUS / "schema.sql").read_text(encoding="utf-8"))
        db.executescript((OPENCODE_CORPUS / "sessions.sql").read_text(encoding="utf-8"))
    return path


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    folder = tmp_path_factory.mktemp("everywhere")
    path = folder / "agents.db"
    cli(str(path), "import", "--from", "codex", str(CODEX_ROOT))
    cli(str(path), "import", "--from", "claude-code", str(CLAUDE_ROOT))
    cli(str(path), "import", "--from", "opencode", str(opencode_db(folder)))
    return str(path)


def session_of(db: str, agent: str) -> str:
    """The main session of ``agent`` in the store."""
    return {"codex": CODEX, "opencode": OPENCODE}.get(agent) or claude_id(db)


@pytest.fixture
def copy(db: str, tmp_path: Path) -> str:
    """A copy of the store, for the commands that write."""
    target = tmp_path / "copy.db"
    shutil.copy(db, target)
    return str(target)


def claude_id(db: str) -> str:
    """The main Claude Code session (the sub-agent's is the other one of that agent)."""
    listed = json.loads(cli(db, "list", "--agent", "claude-code", "--json").stdout)
    found = next(s["id"] for s in listed if "claude-subagent" not in s["tags"])
    assert found == CLAUDE
    return found


def test_list_filters_by_agent(db: str) -> None:
    everything = {s["id"] for s in json.loads(cli(db, "list", "--json").stdout)}
    codex = {s["id"] for s in json.loads(cli(db, "list", "--agent", "codex", "--json").stdout)}
    claude = json.loads(cli(db, "list", "--agent", "claude-code", "--json").stdout)
    opencode = json.loads(cli(db, "list", "--agent", "opencode", "--json").stdout)
    assert codex == {CODEX, CODEX_CHILD}
    assert {s["id"] for s in opencode} == {OPENCODE, OPENCODE_CHILD}
    assert len(claude) == 2
    assert codex | {s["id"] for s in claude + opencode} == everything
    refused = cli(db, "list", "--agent", "codex", "--tag", "x", code=2)
    assert refused.stderr.startswith("error: --agent AGENT is --tag agent:AGENT")


@pytest.mark.parametrize("agent", AGENTS)
def test_show_todos_and_messages_in_every_provider_format(db: str, agent: str) -> None:
    sid = session_of(db, agent)
    assert SAID[agent] in cli(db, "show", sid).stdout
    todos = json.loads(cli(db, "todos", sid, "--json").stdout)
    assert [(t["content"], t["status"]) for t in todos] == PLANS[agent]
    # the opencode session was compacted: the history the model sees now starts with the
    # summary; before the compaction it is the prompt and the plan tool's calls
    at = ["--at", str(asyncio.run(before_compaction(db, sid)))] if agent == "opencode" else []
    now = json.loads(cli(db, "messages", sid, "--json").stdout)
    assert now[0]["role"] == "user"
    for fmt, key in (("openai-chat", "role"), ("openai-responses", "type"), ("anthropic", "role")):
        shaped = json.loads(cli(db, "messages", sid, "--format", fmt, *at).stdout)
        assert shaped and all(key in item for item in shaped)
        assert SAID[agent] in json.dumps(shaped)
    chat = json.loads(cli(db, "messages", sid, "--format", "openai-chat", *at).stdout)
    calls = [c["function"]["name"] for m in chat for c in m.get("tool_calls", [])]
    assert PLAN_TOOLS[agent] in calls
    if at:
        assert "the failing parser test was fixed" in json.dumps(now)
        assert PLAN_TOOLS[agent] not in json.dumps(now)


async def before_compaction(db: str, sid: str) -> int:
    """The seq before a session's first compaction summary."""
    async with SessionStore(db) as store:
        events = await store.read_from(sid)
    return next(
        e.seq - 1
        for e in events
        if e.type == "user/message" and e.payload.get("source", {}).get("kind") == "compaction"
    )


def hit_sessions(found: list[dict[str, Any]]) -> set[str]:
    return {hit["session"] if "session" in hit else hit["sessionId"] for hit in found}


def test_search_finds_every_agent(db: str) -> None:
    found = json.loads(cli(db, "search", "json flag", "--json").stdout)
    assert {CODEX, claude_id(db)} <= hit_sessions(found)
    for agent in AGENTS:
        found = json.loads(cli(db, "search", SEARCHED[agent], "--json").stdout)
        assert session_of(db, agent) in hit_sessions(found), agent


def test_verify_reports_the_open_claude_turn_as_interrupted(db: str) -> None:
    """Claude Code writes no end of turn: the imported session's last turn is open, imported
    as it is, and `verify` says interrupted (a warning, exit status 0), nothing repaired."""
    sid = claude_id(db)
    before = json.loads(cli(db, "list", "--agent", "claude-code", "--json").stdout)
    report = json.loads(cli(db, "verify", sid, "--json").stdout)
    text = json.dumps(report)
    assert "interrupted" in text
    assert json.loads(cli(db, "list", "--agent", "claude-code", "--json").stdout) == before
    assert "interrupted" not in json.dumps(json.loads(cli(db, "verify", CODEX, "--json").stdout))


def test_export_in_the_agents_format_is_byte_identical(db: str, tmp_path: Path) -> None:
    out = tmp_path / "rollout.jsonl"
    cli(db, "export", "--format", "codex", CODEX, "-o", str(out))
    assert out.read_bytes() == CODEX_FILE.read_bytes()
    piped = CliRunner().invoke(
        main, ["--db", db, "export", "--format", "claude-code", claude_id(db)]
    )
    assert piped.exit_code == 0 and piped.stdout_bytes == CLAUDE_FILE.read_bytes()
    wrong = cli(db, "export", "--format", "claude-code", CODEX, code=1)
    assert wrong.stderr == f"error: session {CODEX} holds no claude-code line to export\n"


def test_fork_and_prune_an_imported_session(copy: str, tmp_path: Path) -> None:
    cli(copy, "fork", CODEX, "--as", "forked")  # a fork keeps the tags: agent:codex
    todos = json.loads(cli(copy, "todos", "forked", "--json").stdout)
    assert [(t["content"], t["status"]) for t in todos] == PLAN
    archive = tmp_path / "archive"
    cli(copy, "prune", "--tag", "agent:codex", "--keep-last", "1", "--archive", str(archive))
    left = [s["id"] for s in json.loads(cli(copy, "list", "--agent", "codex", "--json").stdout)]
    assert left == ["forked"]
    assert sorted(p.name for p in archive.iterdir()) == [
        f"{CODEX}.jsonl.gz",
        f"{CODEX_CHILD}.jsonl.gz",
    ]
    # the archive imports back, and still exports the agent's file byte for byte
    with gzip.open(archive / f"{CODEX}.jsonl.gz", "rb") as packed:
        (tmp_path / "back.jsonl").write_bytes(packed.read())
    cli(copy, "import", str(tmp_path / "back.jsonl"))
    for sid in (CODEX, "forked"):
        again = CliRunner().invoke(main, ["--db", copy, "export", "--format", "codex", sid])
        assert again.exit_code == 0 and again.stdout_bytes == CODEX_FILE.read_bytes()


def test_the_viewer_shows_an_imported_sessions_plan(db: str) -> None:
    pytest.importorskip("starlette")
    pytest.importorskip("httpx2")
    from starlette.testclient import TestClient

    from todo_sessions.web import create_app

    with TestClient(create_app(db, allowed_hosts=["testserver"])) as client:
        listed = {s["id"] for s in client.get("/api/sessions").json()["sessions"]}
        assert {session_of(db, agent) for agent in AGENTS} <= listed
        for agent in AGENTS:
            sid = session_of(db, agent)
            state = client.get(f"/api/sessions/{sid}/state").json()
            assert [(t["content"], t["status"]) for t in state["todos"]] == PLANS[agent]
            page = client.get(f"/sessions/{sid}")
            assert page.status_code == 200 and SAID[agent] in page.text
            found = client.get("/api/search", params={"q": SEARCHED[agent]}).json()
            assert sid in json.dumps(found), agent


class _Conn:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    async def session_update(self, session_id: str, update: Any) -> None:
        from todo_sessions.acp.mapping import update_to_wire

        self.sent.append(update_to_wire(update))


@pytest.mark.parametrize("kind", AGENTS)
async def test_acp_lists_and_replays_each_agents_session_with_its_plan(
    copy: str, kind: str
) -> None:
    pytest.importorskip("acp")
    from todo_sessions.acp.agent import TodoSessionsAgent

    sid = {"codex": CODEX, "claude-code": CLAUDE, "opencode": OPENCODE}[kind]
    service = SessionService(SessionStore(copy))
    agent = TodoSessionsAgent(service)
    conn = _Conn()
    agent.on_connect(conn)  # type: ignore[arg-type]
    try:
        listed = [s.session_id for s in (await agent.list_sessions()).sessions]
        assert {CODEX, CLAUDE, OPENCODE} <= set(listed)
        await agent.load_session(cwd="/home/ada/proj", session_id=sid)
        kinds = [u["sessionUpdate"] for u in conn.sent]
        plans = [u["entries"] for u in conn.sent if u["sessionUpdate"] == "plan"]
        assert "user_message_chunk" in kinds and "tool_call" in kinds
        assert [(e["content"], e["status"]) for e in plans[-1]] == PLANS[kind]
        said = "".join(
            u["content"].get("text", "")
            for u in conn.sent
            if u["sessionUpdate"] == "user_message_chunk"
        )
        assert SAID[kind] in said
    finally:
        await service.aclose()


@pytest.mark.parametrize("agent", AGENTS)
async def test_the_agent_loop_resumes_an_imported_session(copy: str, agent: str) -> None:
    from todo_sessions.harness import AgentLoop, ScriptedModel, ScriptedResponse, ToolRegistry

    sid = {"codex": CODEX, "claude-code": CLAUDE, "opencode": OPENCODE}[agent]
    async with SessionStore(copy) as store:
        before = (await store.summary(sid)).next_seq
    service = SessionService(SessionStore(copy), strict=True)
    try:
        session = await service.resume(sid)
        loop = AgentLoop(session, ScriptedModel([ScriptedResponse(text="done")]), ToolRegistry())
        outcome = await loop.run_turn("anything left?")
        assert (outcome.reason, outcome.text) == ("completed", "done")
        await service.flush(sid)
        messages = await service.store.derive_messages(sid)
        assert messages[-1].role == "assistant"
        assert [b.text for b in messages[-1].content if b.type == "text"] == ["done"]
        said = "Add a --json flag" if agent != "opencode" else "the failing parser test was fixed"
        assert said in json.dumps([m.model_dump(mode="json") for m in messages])
        assert (await service.store.summary(sid)).next_seq > before
        todos = await service.store.current_todos(sid)
        assert [(t.content, t.status) for t in todos or []] == PLANS[agent]
    finally:
        await service.aclose()
    await asyncio.sleep(0)
