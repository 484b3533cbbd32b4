"""The real Codex CLI (``@openai/codex``, pinned in tests/codex_cli/package.json and installed
by .ci/run) run offline against a loopback fake of the Responses API (fake_responses.py): it
writes a plan, runs a command, delegates to a sub-agent, completes the plan and answers. The
rollout files it writes are imported, and what is imported is checked against what the CLI
itself recorded; the export gives the files back byte for byte."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from fake_responses import FINAL, PLAN_DONE, PLAN_START, PROMPT, SUBTASK, fake_responses_server

from todo_sessions import SessionStore, verify_session
from todo_sessions.importers import CodexImporter, export_session, import_paths

INSTALLED = Path(__file__).resolve().parents[1] / "codex_cli" / "node_modules" / ".bin" / "codex"
CODEX = os.environ.get("TODO_SESSIONS_CODEX_BIN") or str(INSTALLED)

pytestmark = pytest.mark.skipif(
    not (Path(CODEX).exists() and shutil.which("node")),
    reason="needs node and the Codex CLI: npm install --prefix tests/codex_cli (.ci/run does)",
)

CONFIG = """\
model = "fake-model"
model_provider = "fake"
approval_policy = "never"
sandbox_mode = "danger-full-access"

[model_providers.fake]
name = "fake"
base_url = "http://127.0.0.1:{port}/v1"
wire_api = "responses"

[tools.update_plan]
enabled = true
"""


def run_codex(tmp_path: Path, port: int) -> Path:
    """Run ``codex exec`` once (a home of its own, the fake as its provider); its home."""
    home, work = tmp_path / "codex-home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (home / "config.toml").write_text(CONFIG.format(port=port), encoding="utf-8")
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "CODEX_HOME": str(home),
    }
    done = subprocess.run(
        [CODEX, "exec", "--skip-git-repo-check", PROMPT],
        cwd=work,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return home


def recorded(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def own_calls(path: Path) -> list[tuple[str, str]]:
    """The function calls the CLI recorded: (name, arguments)."""
    return [
        (line["payload"]["name"], line["payload"]["arguments"])
        for line in recorded(path)
        if line["type"] == "response_item" and line["payload"].get("type") == "function_call"
    ]


def read(path: Path) -> bytes:
    return path.read_bytes()


async def test_codex_cli_sessions_import_with_plan_calls_and_child(tmp_path: Path) -> None:
    with fake_responses_server() as server:
        home = run_codex(tmp_path, server.server_address[1])
    async with SessionStore(f"sqlite:///{tmp_path}/store.db") as store:
        results = await import_paths(store, CodexImporter(), [home / "sessions"])
        assert [r.status for r in results] == ["created", "created"]
        assert all(r.warnings == [] and r.unknown_kinds == {} for r in results)
        main, child = results
        # the plan: as the CLI recorded it
        writes = [e for e in await store.read_from(main.session_id) if e.type == "todo/write"]
        assert [w.data_copy()["todos"] for w in writes] == [
            [{"content": p["step"], "status": p["status"]} for p in plan["plan"]]
            for plan in (PLAN_START, PLAN_DONE)
        ]
        todos = await store.current_todos(main.session_id)
        assert [t.status for t in todos or []] == ["completed", "completed"]
        # the calls: Codex's own names and argument strings, in its order
        calls = [e.data_copy() for e in await store.read_from(main.session_id)]
        stored = [(c["name"], c["arguments"]) for c in calls if "callId" in c and "name" in c]
        assert stored == own_calls(main.path)
        assert [name for name, _ in stored] == [
            "update_plan",
            "exec_command",
            "spawn_agent",
            "wait_agent",
            "update_plan",
        ]
        results_ = await store.derive_messages(main.session_id)
        tool_texts = [
            b.content[0].text for m in results_ for b in m.content if b.type == "tool-result"
        ]
        assert any("tool-ran-here" in text for text in tool_texts)
        messages = await store.derive_messages(main.session_id)
        prompts = [m for m in messages if m.role == "user" and m.source.kind == "user"]
        assert [[b.text for b in m.content] for m in prompts] == [[PROMPT]]
        assert [b.text for b in messages[-1].content] == [FINAL]
        assert await verify_session(store, main.session_id) == []
        # the sub-agent: a child session, its prompt and its command
        assert (await store.summary(child.session_id)).parent == main.session_id
        child_messages = await store.derive_messages(child.session_id)
        assert [b.text for b in child_messages[0].content] == [SUBTASK]
        assert [n for n, _ in own_calls(child.path)] == ["exec_command"]
        # byte-identical export, and a re-import adds nothing
        for result in results:
            assert await export_session(store, CodexImporter(), result.session_id) == read(
                result.path
            )
        again = await import_paths(store, CodexImporter(), [home / "sessions"])
        assert [r.status for r in again] == ["unchanged", "unchanged"]
