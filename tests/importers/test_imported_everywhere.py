"""Everything works on imported sessions (issue #37, item 3): Claude Code and Codex sessions
imported with ``todo-sessions import --from`` into one store, then read by every command
(``list --agent``, ``show``, ``todos``, ``messages --format``, ``search``, ``verify``, ``fork``,
``prune`` and ``export --format``), the viewer, the ACP agent (``session/list`` and
``session/load``: an editor replays a Codex session with its plan) and the project's own agent
loop, which resumes an imported session and runs a turn of it."""

from __future__ import annotations

import asyncio
import gzip
import json
import shutil
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


def cli(db: str, *args: str, code: int = 0) -> Result:
    result = CliRunner().invoke(main, ["--db", db, *args])
    assert result.exit_code == code, (args, result.output, result.stderr)
    assert "Traceback" not in result.stderr
    return result


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("everywhere") / "agents.db"
    cli(str(path), "import", "--from", "codex", str(CODEX_ROOT))
    cli(str(path), "import", "--from", "claude-code", str(CLAUDE_ROOT))
    return str(path)


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
    assert codex == {CODEX, CODEX_CHILD}
    assert len(claude) == 2 and codex | {s["id"] for s in claude} == everything
    assert json.loads(cli(db, "list", "--agent", "opencode", "--json").stdout) == []
    refused = cli(db, "list", "--agent", "codex", "--tag", "x", code=2)
    assert refused.stderr.startswith("error: --agent AGENT is --tag agent:AGENT")


@pytest.mark.parametrize("agent", ["codex", "claude-code"])
def test_show_todos_and_messages_in_every_provider_format(db: str, agent: str) -> None:
    sid = CODEX if agent == "codex" else claude_id(db)
    assert "Add a --json flag" in cli(db, "show", sid).stdout
    todos = json.loads(cli(db, "todos", sid, "--json").stdout)
    assert [(t["content"], t["status"]) for t in todos] == PLAN
    plain = json.loads(cli(db, "messages", sid, "--json").stdout)
    assert plain[0]["role"] == "user"
    for fmt, key in (("openai-chat", "role"), ("openai-responses", "type"), ("anthropic", "role")):
        shaped = json.loads(cli(db, "messages", sid, "--format", fmt).stdout)
        assert shaped and all(key in item for item in shaped)
        assert "Add a --json flag" in json.dumps(shaped)
    chat = json.loads(cli(db, "messages", sid, "--format", "openai-chat").stdout)
    calls = [c["function"]["name"] for m in chat for c in m.get("tool_calls", [])]
    assert ("update_plan" if agent == "codex" else "TodoWrite") in calls


def test_search_finds_both_agents(db: str) -> None:
    found = json.loads(cli(db, "search", "json flag", "--json").stdout)
    sessions = {hit["session"] if "session" in hit else hit["sessionId"] for hit in found}
    assert CODEX in sessions and claude_id(db) in sessions


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
        assert {CODEX, claude_id(db)} <= listed
        for sid in (CODEX, claude_id(db)):
            state = client.get(f"/api/sessions/{sid}/state").json()
            assert "Add the --json flag" in json.dumps(state["todos"])
            page = client.get(f"/sessions/{sid}")
            assert page.status_code == 200 and "Add a --json flag" in page.text
        found = client.get("/api/search", params={"q": "json flag"}).json()
        assert CODEX in json.dumps(found)


class _Conn:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    async def session_update(self, session_id: str, update: Any) -> None:
        from todo_sessions.acp.mapping import update_to_wire

        self.sent.append(update_to_wire(update))


async def test_acp_lists_and_replays_a_codex_session_with_its_plan(copy: str) -> None:
    pytest.importorskip("acp")
    from todo_sessions.acp.agent import TodoSessionsAgent

    service = SessionService(SessionStore(copy))
    agent = TodoSessionsAgent(service)
    conn = _Conn()
    agent.on_connect(conn)  # type: ignore[arg-type]
    try:
        listed = [s.session_id for s in (await agent.list_sessions()).sessions]
        assert CODEX in listed and CLAUDE in listed
        await agent.load_session(cwd="/home/ada/proj", session_id=CODEX)
        kinds = [u["sessionUpdate"] for u in conn.sent]
        plans = [u["entries"] for u in conn.sent if u["sessionUpdate"] == "plan"]
        assert "user_message_chunk" in kinds and "tool_call" in kinds
        assert [(e["content"], e["status"]) for e in plans[-1]] == PLAN
        said = "".join(
            u["content"].get("text", "")
            for u in conn.sent
            if u["sessionUpdate"] == "user_message_chunk"
        )
        assert "Add a --json flag" in said
    finally:
        await service.aclose()


@pytest.mark.parametrize("agent", ["codex", "claude-code"])
async def test_the_agent_loop_resumes_an_imported_session(copy: str, agent: str) -> None:
    from todo_sessions.harness import AgentLoop, ScriptedModel, ScriptedResponse, ToolRegistry

    sid = CODEX if agent == "codex" else CLAUDE
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
        assert "Add a --json flag" in json.dumps([m.model_dump(mode="json") for m in messages])
        assert (await service.store.summary(sid)).next_seq > before
        todos = await service.store.current_todos(sid)
        assert [(t.content, t.status) for t in todos or []] == PLAN
    finally:
        await service.aclose()
    await asyncio.sleep(0)
