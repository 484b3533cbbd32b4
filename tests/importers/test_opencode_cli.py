"""The real opencode CLI (``opencode-ai``, pinned in tests/opencode_cli/package.json and
installed by .ci/run) run offline against a loopback fake of the Chat Completions API
(fake_chat.py, an ``@ai-sdk/openai-compatible`` provider in its ``opencode.json``; its homes
in tmp_path): it writes a todo list, runs a command, delegates to a sub-agent (``task``),
updates the list and answers, while its database is imported again and again; then the
database is imported, checked against what opencode itself recorded, grown by another prompt
and imported again, exported (byte for byte what ``opencode export`` prints), and the export
read back by the real ``opencode import``."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest
from fake_chat import (
    FINAL,
    FOLLOW_ANSWER,
    FOLLOW_UP,
    PROMPT,
    REASONING,
    SUBTASK,
    TODOS_DONE,
    TODOS_START,
    fake_chat_server,
)
from test_opencode import EXPORT_FILE, EXPORTED, fixture_db

from todo_sessions import SessionStore, verify_session
from todo_sessions.harness.requests import derive_request
from todo_sessions.importers import OpencodeImporter, export_session, import_paths

INSTALLED = Path(__file__).resolve().parents[1] / "opencode_cli" / "node_modules" / ".bin"
OPENCODE = os.environ.get("TODO_SESSIONS_OPENCODE_BIN") or str(INSTALLED / "opencode")


def installed() -> bool:
    """The CLI is there and is not the stub its package has until its postinstall ran."""
    binary = Path(OPENCODE).resolve()
    return binary.is_file() and binary.stat().st_size > 1_000_000


pytestmark = [
    pytest.mark.skipif(
        not (installed() and shutil.which("node") and shutil.which("npm")),
        reason="needs node, npm and the opencode CLI: npm install --prefix tests/opencode_cli "
        "(.ci/run does)",
    ),
    pytest.mark.xdist_group("opencode_cli"),
]


class Opencode:
    """The CLI with homes of its own under ``root`` and the fake as its only provider."""

    def __init__(self, root: Path, port: int) -> None:
        self.root = root
        config = root / "config" / "opencode"
        config.mkdir(parents=True)
        provider = {
            "npm": "@ai-sdk/openai-compatible",
            "name": "Fake",
            "options": {"baseURL": f"http://127.0.0.1:{port}/v1", "apiKey": "fake-key"},
            "models": {"fake-model": {"name": "Fake", "tool_call": True, "reasoning": True}},
        }
        settings = {
            "provider": {"fake": provider},
            "model": "fake/fake-model",
            "small_model": "fake/fake-model",
            "autoupdate": False,
            "share": "disabled",
            "permission": {"bash": "allow", "edit": "allow"},
        }
        (config / "opencode.json").write_text(json.dumps(settings), encoding="utf-8")
        self.db = root / "data" / "opencode" / "opencode.db"

    def env(self) -> dict[str, str]:
        root = self.root
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(root),
            "XDG_DATA_HOME": str(root / "data"),
            "XDG_CONFIG_HOME": str(root / "config"),
            "XDG_CACHE_HOME": str(root / "cache"),
            "XDG_STATE_HOME": str(root / "state"),
            "OPENCODE_DISABLE_MODELS_FETCH": "1",
            "OPENCODE_DISABLE_AUTOUPDATE": "1",
            "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
            "OPENCODE_PURE": "1",
            # the dependency install opencode starts in its config directory stays offline
            "npm_config_offline": "true",
            "npm_config_registry": "http://127.0.0.1:9/",
        }

    def popen(self, *args: str, cwd: Path) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [OPENCODE, *args],
            cwd=cwd,
            env=self.env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def run(self, *args: str, cwd: Path) -> str:
        done = subprocess.run(
            [OPENCODE, *args],
            cwd=cwd,
            env=self.env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout


def recorded(db: Path) -> dict[str, Any]:
    """What opencode recorded, read here by hand: sessions, and per session its tool parts
    ``(tool, input)`` and its messages' roles, in order."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        sessions = dict(conn.execute("SELECT id, parent_id FROM session"))
        parts = conn.execute(
            "SELECT p.session_id, p.data FROM part p JOIN message m ON m.id = p.message_id "
            "ORDER BY m.time_created, m.id, p.id"
        ).fetchall()
        todos = conn.execute("SELECT content, status FROM todo ORDER BY position").fetchall()
    tools: dict[str, list[tuple[str, Any]]] = {sid: [] for sid in sessions}
    for sid, data in parts:
        part = json.loads(data)
        if part["type"] == "tool":
            tools[sid].append((part["tool"], part["state"]["input"]))
    return {"sessions": sessions, "tools": tools, "todos": todos}


async def typed(store: SessionStore, session_id: str, kind: str) -> list[dict[str, Any]]:
    return [e.data_copy() for e in await store.read_from(session_id) if e.type == kind]


def texts(message: Any) -> list[str]:
    return [b.text for b in message.content if getattr(b, "type", None) == "text"]


async def import_while_running(
    store: SessionStore, cli: Opencode, work: Path, *args: str
) -> list[str]:
    """Run the CLI, importing its database again and again until it is done; the statuses
    seen."""
    process = cli.popen(*args, cwd=work)
    seen: list[str] = []
    try:
        while process.poll() is None:
            if cli.db.exists():
                results = await import_paths(store, OpencodeImporter(), [cli.db])
                seen.extend(r.status for r in results)
                if seen and seen[0] == "error":  # opencode is still creating its tables
                    assert "still creating" in str(results[0].message)
                    seen.clear()
            await asyncio.sleep(0.05)
    finally:
        out, err = process.communicate(timeout=120)
    assert process.returncode == 0, out + err
    return seen


async def test_opencode_cli_sessions_import_while_running_and_round_trip(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    store_url = f"sqlite:///{tmp_path}/store.db"
    with fake_chat_server(delay=0.2) as server:
        cli = Opencode(tmp_path / "agent", server.server_address[1])
        async with SessionStore(store_url) as store:
            seen = await import_while_running(store, cli, work, "run", PROMPT)
            assert "created" in seen and not {"error", "conflict", "rewritten"} & set(seen)
            results = await import_paths(store, OpencodeImporter(), [cli.db])
            assert all(r.warnings == [] and r.unknown_kinds == {} for r in results)
            own = recorded(cli.db)
            [main_id] = [s for s, parent in own["sessions"].items() if parent is None]
            [child_id] = [s for s, parent in own["sessions"].items() if parent == main_id]
            main, child = f"opencode-{main_id}", f"opencode-{child_id}"
            assert [r.session_id for r in results] == [main, child]
            await check_main(store, main, own["tools"][main_id], own["todos"])
            await check_child(store, child, main, own["tools"][child_id])
            # the session grows (opencode run --session): only the new messages are appended
            before = len(await store.read_from(main))
            cli.run("run", "--session", main_id, FOLLOW_UP, cwd=work)
            grown = await import_paths(store, OpencodeImporter(), [cli.db])
            assert [r.status for r in grown] == ["appended", "unchanged"]
            added = (await store.read_from(main))[before:]
            assert [e.type for e in added].count("opencode/message") == grown[0].lines == 2
            assert texts((await store.derive_messages(main))[-1]) == [FOLLOW_ANSWER]
            again = await import_paths(store, OpencodeImporter(), [cli.db])
            assert [r.status for r in again] == ["unchanged", "unchanged"]
            # export: what opencode export prints, byte for byte
            exports = {}
            for sid in (main_id, child_id):
                ours = await export_session(store, OpencodeImporter(), f"opencode-{sid}")
                assert ours.decode() == cli.run("export", sid, cwd=work)
                exports[sid] = ours
    round_trip(tmp_path, exports)


async def check_main(
    store: SessionStore, main: str, tools: list[tuple[str, Any]], todos: list[Any]
) -> None:
    # the todo list: a snapshot per todowrite, the cancelled item dropped from it
    writes = await typed(store, main, "todo/write")
    expected = [
        [
            {"content": t["content"], "status": t["status"]}
            for t in todos_
            if t["status"] != "cancelled"
        ]
        for todos_ in (TODOS_START, TODOS_DONE)
    ]
    assert [w["todos"] for w in writes] == expected
    assert [(t.content, t.status) for t in await store.current_todos(main) or []] == [
        (c, s) for c, s in todos if s != "cancelled"
    ]
    # the calls: opencode's own names, and its inputs as the arguments, in its order
    calls = await typed(store, main, "tool/call")
    assert [(c["name"], json.loads(c["arguments"])) for c in calls] == tools
    assert [name for name, _ in tools] == ["todowrite", "bash", "task", "todowrite"]
    messages = await store.derive_messages(main)
    results = [b for m in messages for b in m.content if b.type == "tool-result"]
    assert any("tool-ran-here" in b.content[0].text for b in results)
    prompts = [m for m in messages if m.role == "user" and m.source.kind == "user"]
    assert [PROMPT in "".join(texts(m)) for m in prompts] == [True]
    reasoning = [b.text for m in messages for b in m.content if b.type == "reasoning"]
    assert reasoning == [REASONING]
    assert texts(messages[-1]) == [FINAL]
    # the session as a request in a provider's format: opencode's calls, answered
    chat = derive_request(await store.read_from(main)).to_params("openai-chat", model="m")
    called = [c["function"]["name"] for m in chat["messages"] for c in m.get("tool_calls", [])]
    assert called == [name for name, _ in tools]
    answered = [m["tool_call_id"] for m in chat["messages"] if m["role"] == "tool"]
    assert answered == ["main_1", "main_2", "main_3", "main_4"]
    summary = await store.summary(main)
    assert summary.title and "agent:opencode" in summary.tags
    assert await verify_session(store, main) == []


async def check_child(
    store: SessionStore, child: str, main: str, tools: list[tuple[str, Any]]
) -> None:
    assert (await store.summary(child)).parent == main
    messages = await store.derive_messages(child)
    assert texts(messages[0]) == [SUBTASK]
    calls = await typed(store, child, "tool/call")
    assert [(c["name"], json.loads(c["arguments"])) for c in calls] == tools
    assert [name for name, _ in tools] == ["bash"]


async def test_opencode_import_reads_the_corpus_exports(tmp_path: Path) -> None:
    """The committed corpus, imported and exported: the real ``opencode import`` accepts
    each export and ``opencode export`` shows the same session (the corpus's part of a kind
    from a newer release left out: opencode refuses to import a part it does not know)."""
    db = fixture_db(tmp_path / "corpus")
    with sqlite3.connect(db) as conn:  # a part of a newer release: this one refuses it
        conn.execute("DELETE FROM part WHERE data LIKE '%x-newer-part%'")
    async with SessionStore(f"sqlite:///{tmp_path}/store.db") as store:
        results = await import_paths(store, OpencodeImporter(), [db, EXPORT_FILE])
        exports = {
            r.session_id.removeprefix("opencode-"): await export_session(
                store, OpencodeImporter(), r.session_id
            )
            for r in results
        }
    assert len(exports) == 3
    assert exports[EXPORTED.removeprefix("opencode-")] == EXPORT_FILE.read_bytes()
    round_trip(tmp_path, exports)


def round_trip(tmp_path: Path, exports: dict[str, bytes]) -> None:
    """The real ``opencode import`` accepts our export (byte for byte opencode's own, so
    what it shows after is what it shows after importing opencode's own export), and
    ``opencode export`` then shows the same session: the same JSON, but for the directory,
    which opencode relocates to where it imports, and the order of some keys."""
    here = tmp_path / "import-here"
    here.mkdir()
    cli = Opencode(tmp_path / "fresh", 9)  # a fresh home; no model is asked
    for sid, ours in exports.items():
        path = tmp_path / f"{sid}.json"
        path.write_bytes(ours)
        cli.run("import", str(path), cwd=here)
    for sid, ours in exports.items():
        shown = json.loads(cli.run("export", sid, cwd=here))
        assert {shown["info"].pop(k) for k in ("directory", "path")} == {
            str(here),
            str(here).lstrip("/"),
        }
        expected = json.loads(ours)
        del expected["info"]["directory"], expected["info"]["path"]
        assert shown == expected
